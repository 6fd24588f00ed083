"""A business tool's arguments from the caller's words, by each argument's kind (its JSON Schema).

``from_request`` reads what a whole request holds ("Can someone come out on Thursday for a
blocked drain?": the day); ``from_answer`` reads the answer to one question a form asked ("Four.",
"Anna Lee", "yes"). Each value comes back typed as the schema says (an integer, "thursday",
"2026-12-10", "19:30", "01615550199", a name, true or false, one of the enum's values), or is
left out when the words do not say it, so a form asks for it instead of guessing.

A whole request is read only for what it states unmistakably: a number next to the argument's
own words ("a table for four people"), a day, a time with its "pm" or its colon, one of the
enum's values, a phone number's digits, a name after "my name is". A yes, a bare name or free
text is read only as the answer to its own question.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from agent.business.tool_spec import DeclaredTool, fill
from agent.business.words import numbers_as_digits, same_word
from agent.tools import words
from processors.turns.comparison_form import comparison_words

# "7 pm", "7.30pm", "19:30", "half past seven" is not read (Whisper writes times as digits).
_TIME = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*(a\.?m\.?|p\.?m\.?|o'?clock)|\b(\d{1,2}):(\d{2})\b", re.I)
_NOON = {"noon": "12:00", "midday": "12:00", "midnight": "00:00"}
# Numbers that are not a count: a date ("the 12th", "on the 12"), a time without its "pm" ("at 8").
_NOT_A_COUNT = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)\b|\bthe \d{1,2}\b|\bat \d{1,2}(?:[:.]\d{2})?\b")
_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d.])")
_NEAR = 2  # a number belongs to an argument when one of the argument's words is this close after it


def from_request(tool: DeclaredTool, text: str, now: datetime) -> dict:
    """What a whole request says of each of ``tool``'s arguments (see the module docstring)."""
    found = {}
    for name in tool.parameters.get("properties", {}):
        value = read(tool, name, text, now, alone=False)
        if value is not None:
            found[name] = value
    return found


def from_answer(tool: DeclaredTool, name: str, text: str, now: datetime):
    """The argument ``name`` as the answer to its own question says it, or None."""
    return read(tool, name, text, now, alone=True)


def read(tool: DeclaredTool, name: str, text: str, now: datetime, *, alone: bool):
    """One argument's value in ``text``; ``alone``: the words answer its own question."""
    kind = tool.argument_kind(name)
    prop = tool.parameters["properties"][name]
    keyed = words.keyed_digits(text)
    if keyed is not None:  # the keypad gives numbers only
        return _keyed(kind, keyed)
    if kind in ("integer", "number"):
        return _number(tool, text, name, prop, kind, alone)
    if kind == "choice":
        return _choice(text, prop["enum"])
    if kind in ("weekday", "date"):
        day = _date(text, now)
        if day is None:
            return None
        return day.strftime("%A").lower() if kind == "weekday" else day.isoformat()
    if kind == "time":
        return _time(text)
    if kind == "phone":
        number = words.order_number(text.replace("+", " plus "))
        return number if number and len(number) >= 7 else None
    if kind == "name":
        return words.name(text) if alone else words.stated_name(text)
    if kind == "yes_no":
        return words.yes_or_no(text) if alone else None
    said = text.strip().rstrip(".!?").strip()
    return said if alone and said else None


def _keyed(kind: str, digits: str):
    if not digits:
        return None
    if kind in ("integer", "number"):
        return int(digits)
    if kind == "yes_no":  # 1 for yes, 2 for no, as phone menus ask
        return {"1": True, "2": False}.get(digits)
    if kind in ("phone", "text"):
        return digits
    return None


def _only_number_argument(tool: DeclaredTool, name: str) -> bool:
    return [n for n in tool.parameters["properties"] if tool.argument_kind(n) in ("integer", "number")] == [name]


def _number(tool: DeclaredTool, text: str, name: str, prop: dict, kind: str, alone: bool):
    said = _TIME.sub(" ", _NOT_A_COUNT.sub(" ", numbers_as_digits(text)))
    tokens = re.findall(r"\d+(?:\.\d+)?|\w+", said)
    numbers = [(i, t) for i, t in enumerate(tokens) if _NUMBER.fullmatch(t)]
    if not numbers:
        return 1 if alone and re.search(r"\b(a|an|one|just me|myself)\b", said) else None
    if alone and len(numbers) == 1:
        chosen = numbers[0][1]
    else:
        own = set(comparison_words(f"{name.replace('_', ' ')} {prop.get('description', '')}"))
        near = [t for i, t in numbers
                if any(same_word(w, o) for w in tokens[i + 1:i + 1 + _NEAR] for o in own)]
        if len(near) == 1:
            chosen = near[0]
        elif len(numbers) == 1 and not near and _only_number_argument(tool, name):
            chosen = numbers[0][1]  # "a table for 4 at 8 pm": the one number left is the one asked
        else:
            return None
    value = float(chosen)
    if kind == "integer":
        if not value.is_integer():
            return None
        value = int(value)
    low, high = prop.get("minimum"), prop.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


_INITIALED = re.compile(r"\b([a-z])-([a-z]+)\b", re.I)


def _initials_spelled(text: str, options: list[str]) -> str:
    """"an e-bike" -> "an electric bike" when an option says so: a letter and a hyphen stand for
    an option's word that starts with that letter, followed by the same word ("e-scooter")."""
    def spelled(match: re.Match) -> str:
        letter, rest = match.group(1).lower(), match.group(2).lower()
        for option in options:
            said = comparison_words(option)
            for first, second in zip(said, said[1:]):
                if first.startswith(letter) and len(first) > 1 and same_word(second, rest):
                    return f"{first} {second}"
        return match.group(0)
    return _INITIALED.sub(spelled, text)


def _choice(text: str, enum: list) -> str | None:
    """The one option of ``enum`` the words name: by a word of its own, one it shares with no other
    option ("an electric one" of "city bike" and "electric bike"; "the boiler" of "boiler
    service"); of two named, the one with more of its words ("a large pizza", not "pizza")."""
    said = comparison_words(_initials_spelled(text, [str(option) for option in enum]))
    words_of = {option: set(comparison_words(str(option))) for option in enum}
    hits = []
    for option, own in words_of.items():
        others = set().union(*(w for o, w in words_of.items() if o != option))
        distinctive = (own - others) or own
        if any(same_word(w, s) for w in distinctive for s in said):
            hits.append(option)
    hits = [h for h in hits if not any(words_of[h] < words_of[o] for o in hits)]
    return hits[0] if len(hits) == 1 else None


def _date(text: str, now: datetime) -> date | None:
    iso = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", text)
    if iso:
        try:
            return date.fromisoformat(iso.group(1))
        except ValueError:
            return None
    return words.day(text, now)


def _time(text: str) -> str | None:
    lowered = text.lower()
    for word, at in _NOON.items():
        if re.search(rf"\b{word}\b", lowered):
            return at
    match = _TIME.search(numbers_as_digits(text))
    if match is None:
        return None
    if match.group(4) is not None:
        hour, minute = int(match.group(4)), int(match.group(5))
    else:
        hour, minute = int(match.group(1)), int(match.group(2) or 0)
        suffix = match.group(3).lower().replace(".", "")
        if suffix == "pm" and hour < 12:
            hour += 12
        elif suffix == "am" and hour == 12:
            hour = 0
    if hour > 23 or minute > 59:
        return None
    return f"{hour:02d}:{minute:02d}"


def weekday_of(tool, name: str, value) -> str | None:
    """The weekday ("sunday") a weekday or date argument's value falls on, else None."""
    kind = tool.argument_kind(name)
    if kind == "weekday":
        return str(value).lower()
    if kind == "date":
        try:
            return date.fromisoformat(str(value)).strftime("%A").lower()
        except ValueError:
            return None
    return None


_COUNTED = re.compile(r"\{(\w+)\}(\s+)\{(\w+)\}")


def plural(noun: str) -> str:
    """English plural of a phrase's head word: its last word, or the word before "of" ("city bike"
    -> "city bikes", "glass of wine" -> "glasses of wine", "boiler service" -> "boiler services");
    irregular plurals are not known."""
    head, of, rest = noun.partition(" of ")
    if re.search(r"(?:s|x|z|ch|sh)$", head):
        head = f"{head}es"
    elif re.search(r"[^aeiou]y$", head):
        head = f"{head[:-1]}ies"
    else:
        head = f"{head}s"
    return f"{head}{of}{rest}"


def read_back(tool: DeclaredTool, template: str, values: dict, reply: dict | None = None) -> str:
    """``template`` filled with the arguments as they are said (``spoken``) and the ``reply``'s fields.

    A count agrees with what it counts: in "{count} {bike}", a count other than one says the
    bike in the plural ("2 city bikes"). Raises KeyError naming a field it has no value for."""
    said = {name: spoken(tool, name, value) for name, value in values.items()}

    def counted(match: re.Match) -> str:
        number, noun = match.group(1), match.group(3)
        how_many = values.get(number)
        if (number in tool.parameters.get("properties", {}) and tool.argument_kind(number) in ("integer", "number")
                and isinstance(how_many, (int, float)) and how_many != 1 and isinstance(values.get(noun), str)
                and tool.argument_kind(noun) in ("choice", "text")):
            return "{%s}%s%s" % (number, match.group(2), plural(said[noun]).replace("{", "{{").replace("}", "}}"))
        return match.group(0)
    return fill(_COUNTED.sub(counted, template), {**said, **(reply or {})})


def spoken(tool: DeclaredTool, name: str, value) -> str:
    """An argument's value as it is read back to the caller ("thursday" -> "Thursday", "19:30" -> "7:30 pm")."""
    kind = tool.argument_kind(name)
    if kind == "weekday":
        return str(value).capitalize()
    if kind == "date":
        try:
            day = date.fromisoformat(str(value))
        except ValueError:
            return str(value)
        return f"{day:%A} {day.day} {day:%B}"
    if kind == "time" and re.fullmatch(r"\d{2}:\d{2}", str(value)):
        hour, minute = map(int, str(value).split(":"))
        return f"{hour % 12 or 12}{f':{minute:02d}' if minute else ''} {'pm' if hour >= 12 else 'am'}"
    if kind == "phone":
        return " ".join(str(value))
    if kind == "yes_no":
        return "yes" if value else "no"
    return str(value)

"""The A/B's spoken turns for the business under test, each with what a right answer holds.

Consumes ``<business>.bench.yaml`` beside the business file (the shipped shop's:
agent/business/harbor_lane_bikes.bench.yaml shows the form) and returns ``AbTurn``s: the
utterance to speak (``agent/bench/corpus.py`` renders it), its grading (a ``FaqQuestion``, so the
A/B grades exactly as the FAQ suite does), what kind of answer it needs, and the right answer the
reference LLM gives (``agent/bench/reference_llm.py``). ``grade_turn`` grades what a side said.

A follow-up is one call with two turns 8 s apart: ``say`` holds both, only the last is measured
(its end of speech is the clip's), and the first's answer is heard in between.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from agent.bench.corpus import Utterance
from agent.bench.faq import grade
from agent.bench.faq_questions import FaqQuestion, QuestionsError, questions_from
from agent.business.model import default_business_path

# What a turn needs to be answered right; the first three need the LLM (no fixed answer has them).
NEEDS = ("compose", "follow-up", "domain", "template", "tool", "refuse")
NEEDS_THE_LLM = ("compose", "follow-up", "domain")
# The A/B's outcomes per side (JSON "graded"); "refused" is a don't-know to a question the file answers.
GRADES = ("right", "wrong", "refused", "incomplete", "no_answer")
_FROM_FAQ = {"correct": "right", "wrong": "wrong", "dont_know": "refused", "incomplete": "incomplete",
             "no_answer": "no_answer"}
# A quick run (--quick): every third turn, so each kind of need is still there.
QUICK_EVERY = 3


@dataclass(frozen=True)
class AbTurn:
    """One measured turn of the A/B: what is said, how it is graded, the right answer."""

    question: FaqQuestion
    needs: str
    answer: str
    earlier_answer: str = ""

    @property
    def utterance(self) -> Utterance:
        return self.question.utterance

    @property
    def id(self) -> str:
        return self.utterance.id

    @property
    def asked(self) -> str:
        """The measured turn's words: a follow-up's last segment, else the whole utterance."""
        return self.utterance.segments[-1] if self.needs == "follow-up" else self.utterance.text

    @property
    def earlier(self) -> str:
        """A follow-up's first turn, said earlier in the same call ("" for any other turn)."""
        return " ".join(self.utterance.segments[:-1]) if self.needs == "follow-up" else ""


def corpus_path(business_path: Path | str | None) -> Path:
    """The A/B corpus beside a business file: ``shop.yaml`` -> ``shop.bench.yaml``."""
    path = Path(business_path) if business_path else default_business_path()
    return path.with_name(f"{path.stem}.bench.yaml")


def load_corpus(path: Path | str) -> tuple[AbTurn, ...]:
    """Read an A/B corpus (``turns:``; each a FAQ question plus ``needs``, ``kind``, ``answer``
    and, for a follow-up, ``earlier_answer``). Raises ``QuestionsError`` naming the turn."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise QuestionsError(f"A/B corpus {path}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
        raise QuestionsError(f"A/B corpus {path}: expected a list under 'turns:'")
    # The grading fields are the FAQ questions file's: read with its reader (and its checks).
    questions = questions_from(data["turns"], f"A/B corpus {path}", prefix="")
    turns = []
    for item, question in zip(data["turns"], questions):
        name = item["id"]
        needs = item.get("needs")
        if needs not in NEEDS:
            raise QuestionsError(f"A/B corpus {path}: turn {name}: 'needs' is one of {', '.join(NEEDS)}")
        if not isinstance(item.get("answer"), str) or not item["answer"].strip():
            raise QuestionsError(f"A/B corpus {path}: turn {name}: 'answer' (the right answer) is missing")
        if needs == "follow-up" and (len(question.utterance.segments) < 2 or not item.get("earlier_answer")):
            raise QuestionsError(f"A/B corpus {path}: turn {name}: a follow-up says two turns and has 'earlier_answer'")
        utterance = dataclasses.replace(question.utterance, kind=item.get("kind", "short"))
        turns.append(AbTurn(dataclasses.replace(question, utterance=utterance), needs, item["answer"].strip(),
                            str(item.get("earlier_answer", "")).strip()))
    return tuple(turns)


def select_turns(corpus: tuple[AbTurn, ...], turns: int | None, quick: bool) -> list[AbTurn]:
    """The turns to run: every ``QUICK_EVERY``-th for --quick, else all, cycled to ``turns``."""
    base = list(corpus[::QUICK_EVERY] if quick else corpus)
    n = turns if turns is not None else len(base)
    if n < 1:
        raise ValueError("--turns must be at least 1")
    return [base[i % len(base)] for i in range(n)]


def grade_turn(turn: AbTurn, answer: str | None, business, now=None) -> str:
    """One of ``GRADES`` for what a side said. For a question the file cannot answer, the
    don't-know line or a hand-over is right; anything else said to it is wrong."""
    outcome = _FROM_FAQ[grade(turn.question, answer, now=now, business=business)]
    if turn.question.unknown and outcome == "wrong" and answer and business.transfer_text.lower() in answer.lower():
        return "right"
    return outcome

"""The FAQ suite's grading and its command: an answer is right, wrong, "don't know" or neither.

Pure functions over answer texts; the spoken suite itself is ``python -m agent bench --suite
faq`` (docs/benchmarks.md), which takes many minutes of real calls and so is a benchmark, not a test.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from agent.bench.ab import parse_args
from agent.bench.faq import OUTCOMES, format_faq, grade, summarize
from agent.bench.faq_questions import QUESTIONS
from agent.business.intents import IntentMatcher
from agent.business.model import load_business

LONDON = ZoneInfo("Europe/London")
TUESDAY = datetime(2026, 12, 1, 10, 30, tzinfo=LONDON)
SATURDAY = datetime(2026, 12, 5, 10, 30, tzinfo=LONDON)


def question(qid: str):
    return next(q for q in QUESTIONS if q.id == qid)


def test_the_suite_has_thirty_questions_in_several_voices_some_the_file_does_not_answer():
    assert len(QUESTIONS) >= 30
    assert len({q.utterance.voice for q in QUESTIONS}) >= 6
    assert sum(q.unknown for q in QUESTIONS) >= 5
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)


def test_questions_are_worded_unlike_the_intent_examples_but_for_two_asr_cases():
    # "Where is your shop?" is the question tiny.en once heard as "When with your sharp."
    examples = {e.lower().rstrip("?") for i in load_business().intents.values() for e in i.examples}
    same = [q.id for q in QUESTIONS if q.utterance.text.lower().rstrip("?") in examples]
    assert len(same) <= 2, same


@pytest.mark.parametrize("qid, answer, outcome", [
    ("faq-sunday", "We're closed on Sunday.", "correct"),
    ("faq-sunday", "Yes, we are open on Sundays.", "wrong"),
    ("faq-tune-up", "A basic tune-up is forty-five dollars.", "correct"),
    ("faq-tune-up", "A basic tune-up is 12 dollars.", "wrong"),
    ("faq-city-bike", "A city bike rental is 20 dollars a day, and an electric bike rental is 45 dollars a day.", "correct"),
    ("faq-city-bike", "A city bike rental is 45 dollars a day.", "wrong"),
    ("faq-phone", "You can reach us on five five five, zero one four two.", "correct"),
    ("faq-phone", "You can reach us on 555 0143.", "incomplete"),
    ("faq-phone", "Our number is 555-0142.", "correct"),
    ("faq-phone", "I'm not sure. Would you like me to put you through to a person?", "dont_know"),
    ("faq-helmets-kids", "I'm sorry, I don't know that. Would you like me to put you through to a person?", "correct"),
    ("faq-helmets-kids", "Yes, we sell helmets for children.", "wrong"),
    ("faq-helmets-kids", "We have many helmets.", "wrong"),  # a guess, even without "yes"
    ("faq-helmet-price", "A bike helmet is 20 dollars.", "wrong"),
    ("faq-where", "", "no_answer"),
])
def test_an_answer_is_graded_against_the_facts_it_must_and_must_not_hold(qid, answer, outcome):
    assert grade(question(qid), answer, now=TUESDAY) == outcome


def test_today_and_tomorrow_are_graded_against_the_day_the_suite_runs():
    tomorrow = question("faq-tomorrow")
    assert grade(tomorrow, "Tomorrow, Wednesday, we're open from 9 in the morning to 6 in the evening.", now=TUESDAY) == "correct"
    # On a Saturday, tomorrow is Sunday: closed.
    assert grade(tomorrow, "We're closed tomorrow, Sunday.", now=SATURDAY) == "correct"
    assert grade(tomorrow, "Yes, from 9 to 6.", now=SATURDAY) == "wrong"


def test_the_fast_path_by_words_alone_answers_its_share_of_the_suite_and_never_wrongly():
    # The true text through the fast path alone (no ASR, no LLM, BRISK_UNDERSTANDING=words): no
    # answer it gives is wrong (tests/test_understanding.py holds the default, by meaning, higher).
    business = load_business()
    from agent.business.facts import FactIndex

    matcher = IntentMatcher(business, facts=FactIndex(business, clock=lambda: TUESDAY), clock=lambda: TUESDAY)
    answered = {q.id: matcher(q.utterance.text) for q in QUESTIONS}
    graded = {qid: grade(question(qid), a.text, now=TUESDAY) for qid, a in answered.items() if a is not None}
    assert len(graded) >= len(QUESTIONS) // 2
    assert "wrong" not in graded.values(), graded


def test_a_side_is_summarised_with_counts_and_latencies_per_path():
    turns = [
        {"grade": "correct", "v2v_ms": 700.0, "fast_path": "hours", "speculative": False},
        {"grade": "correct", "v2v_ms": 1200.0, "fast_path": None, "speculative": True},
        {"grade": "dont_know", "v2v_ms": 1500.0, "fast_path": None, "speculative": False},
        {"grade": "no_answer", "v2v_ms": None, "fast_path": None, "speculative": False},
    ]
    summary = summarize(turns)
    assert [summary[o] for o in OUTCOMES] == [2, 0, 1, 0, 1]
    assert summary["correct_rate"] == 0.5 and summary["fast_path_hits"] == 1
    assert summary["v2v_ms"]["fast_path"]["p50"] == 700.0
    assert summary["v2v_ms"]["llm"]["n"] == 2 and summary["v2v_ms"]["llm_speculative"]["n"] == 1
    text = {side: {"correct": 30, "wrong": 0, "dont_know": 1, "incomplete": 1, "no_answer": 0} for side in ("stock", "brisk")}
    table = format_faq({"stock": summary, "brisk": summary, "text": text,
                        "asr": {"tiny.en": {"wer": 0.1, "intent_agreement": 0.9, "fast_path_matches": 12}}})
    assert "| brisk | 30 | 0 | 1 | 1 |" in table
    assert "| brisk | 4 | 2 (50%) | 0 | 1 | 0 | 1 | 1 |" in table
    assert "| tiny.en | 0.100 | 90% | 12 |" in table


def test_the_bench_takes_the_faq_suite_and_refuses_flags_it_has_no_use_for():
    args = parse_args(["--suite", "faq", "--turns", "5"])
    assert args.suite == "faq" and args.turns == 5 and args.llm == "embedded"
    assert parse_args([]).suite == "ab"
    with pytest.raises(SystemExit):
        parse_args(["--suite", "faq", "--quick"])


def test_the_faq_suite_runs_any_business_with_the_questions_beside_it():
    args = parse_args(["--suite", "faq", "--business", "a.yaml", "--business", "b.yaml", "--text"])
    assert args.business == ["a.yaml", "b.yaml"] and args.text
    # The A/B takes one business (its shop.bench.yaml), and no FAQ options.
    assert parse_args(["--business", "a.yaml"]).business == ["a.yaml"]
    for wrong in (["--business", "a.yaml", "--text"], ["--business", "a.yaml", "--business", "b.yaml"],
                  ["--suite", "turns", "--business", "a.yaml"], ["--suite", "faq", "--llm", "reference"],
                  ["--suite", "faq", "--business", "a.yaml", "--business", "b.yaml",
                                             "--questions", "q.yaml"]):
        with pytest.raises(SystemExit):
            parse_args(wrong)
    from agent.bench.faq_questions import load_questions, questions_path
    from agent.business.model import default_business_path

    examples = default_business_path().parent / "examples"
    # A business file is the one whose name has no second suffix (.faq, .bench, .scenarios beside it).
    for business in [default_business_path(), *sorted(p for p in examples.glob("*.yaml") if "." not in p.stem)]:
        path = questions_path(business)
        asked = load_questions(path)
        assert len(asked) >= 20 and sum(q.unknown for q in asked) >= 4, path
        assert len({q.utterance.voice for q in asked}) >= 6, path


@pytest.mark.parametrize("body, names", [
    ("questions: 3", "expected a list under 'questions:'"),
    ("questions:\n  - {id: a, voice: en-us}", "question a"),
    ("questions:\n  - {id: a, say: 'Hi?', must: [['(unclosed']]}", "question a"),
    ("questions:\n  - {id: a, say: 'Hi?'}\n  - {id: a, say: 'Ho?'}", "ids repeat"),
    ("questions: [", "questions file"),
])
def test_a_malformed_questions_file_is_refused_naming_the_question(tmp_path, body, names):
    from agent.bench.faq_questions import QuestionsError, load_questions

    path = tmp_path / "shop.faq.yaml"
    path.write_text(body)
    with pytest.raises(QuestionsError, match=names.replace("(", "\\(")):
        load_questions(path)


async def test_the_text_section_asks_both_sides_over_a_real_openai_compatible_server():
    # The shop's facts next to the question (Brisk) or the system prompt alone (stock), over
    # real HTTP + SSE to a loopback server that answers by what the request holds.
    from types import SimpleNamespace

    from openai import AsyncOpenAI

    from agent.bench.faq import measure_text
    from agent.bench.scripted_llm import ScriptedLLM
    from agent.caller.loopback import serve_app
    from agent.config import load_config

    def answer_for(messages):
        grounded = any(m["role"] == "system" and "tune-up is 45 dollars" in m["content"] for m in messages[1:])
        if messages[-1]["content"].startswith("Do you sell helmets"):
            return "Yes, we sell helmets for children."
        return "A basic tune-up is 45 dollars." if grounded else "A basic tune-up is 12 dollars."

    llm = ScriptedLLM(ttft_s=0, tokens_per_s=1000, answer_for=answer_for)
    questions = [question("faq-tune-time"), question("faq-helmets-kids")]
    async with serve_app(llm.app()) as url:
        config = load_config(llm_base_url=f"{url}/v1", llm_model="scripted")
        runtime = SimpleNamespace(resources=SimpleNamespace(llm_client=AsyncOpenAI(base_url=f"{url}/v1", api_key="x"),
                                                            llm_model="scripted"))
        text = await measure_text(runtime, config, questions, TUESDAY)
    by = {(t["side"], t["utterance"]): t for t in text["turns"]}
    # Stock guesses both; Brisk answers the tune-up from its fact and gives the helmet question
    # the file's "don't know" without asking the LLM.
    assert by["stock", "faq-helmets-kids"]["grade"] == "wrong"
    assert by["brisk", "faq-helmets-kids"]["fast_path"] == "unknown"
    assert by["brisk", "faq-helmets-kids"]["grade"] == "correct"
    assert by["brisk", "faq-tune-time"]["bot_text"] == "A basic tune-up is 45 dollars."
    assert text["brisk"]["wrong"] == 0 and text["stock"]["wrong"] >= 1
    assert len(llm.requests) == 3  # stock twice, brisk once


def test_several_businesses_are_summarised_each_with_its_right_wrong_and_dont_know():
    from agent.bench.faq import format_summary, summary_by_business

    def counts(right, wrong, dont_know):
        return {"correct": right, "wrong": wrong, "dont_know": dont_know, "incomplete": 0, "no_answer": 0}

    spoken = {**counts(19, 0, 1), "v2v_ms": {"right": {"p50": 610.0}, "fast_path": {"p50": 590.0}, "llm": {"p50": None}}}
    suites = [
        {"config": {"business_name": "Shop", "questions": 20, "unknown_questions": 4}, "brisk": spoken,
         "text": {"brisk": counts(20, 0, 0)}},
        {"config": {"business_name": "Other", "questions": 10, "unknown_questions": 2}, "text": {"brisk": counts(9, 0, 1)}},
    ]
    summary = summary_by_business(suites)
    assert summary["Shop"]["spoken"]["right"] == 19 and summary["Shop"]["spoken"]["v2v_p50_ms"]["right"] == 610.0
    assert summary["Other"]["text"] == {"right": 9, "wrong": 0, "dont_know": 1, "incomplete": 0, "no_answer": 0}
    assert "spoken" not in summary["Other"]
    table = format_summary(summary)
    assert "| Shop | 20 | 19 / 0 / 1 | 20 / 0 / 0 | 610 / 590 |" in table
    assert "| Other | 10 | - | 9 / 0 / 1 | - |" in table

"""The graded A/B: its business corpus, how a turn is graded and split by path, the reference LLM."""

import asyncio
import time

import pytest
from openai import AsyncOpenAI

from agent.bench.ab_corpus import NEEDS_THE_LLM, corpus_path, grade_turn, load_corpus, select_turns
from agent.bench.faq_questions import QuestionsError
from agent.bench.graded import by_path, graded, path_of, ratio_llm
from agent.bench.reference_llm import DONT_KNOW, reference_llm
from agent.business.model import load_business
from agent.caller.loopback import serve_app

BUSINESS = load_business(None)
CORPUS = load_corpus(corpus_path(None))


def test_the_shipped_corpus_is_the_business_callers_and_mostly_needs_the_llm():
    assert len(CORPUS) >= 24 and len({t.id for t in CORPUS}) == len(CORPUS)
    assert sum(t.needs in NEEDS_THE_LLM for t in CORPUS) >= len(CORPUS) / 2
    assert {"compose", "follow-up", "domain", "template", "tool", "refuse"} <= {t.needs for t in CORPUS}
    assert any(t.utterance.voice == "arctic" for t in CORPUS)
    assert len({t.utterance.voice for t in CORPUS if t.utterance.voice != "arctic"}) >= 6


@pytest.mark.parametrize("turn", CORPUS, ids=lambda t: t.id)
def test_every_reference_answer_is_graded_right_and_a_refusal_of_it_is_not(turn):
    assert grade_turn(turn, turn.answer, BUSINESS) == "right"
    if not turn.question.unknown and turn.needs != "tool":
        assert grade_turn(turn, BUSINESS.unknown_answer, BUSINESS) == "refused"


def test_a_follow_up_is_two_turns_in_one_call_and_only_the_last_is_asked():
    turn = next(t for t in CORPUS if t.needs == "follow-up")
    assert turn.utterance.pauses_ms[-1] >= 8000 and turn.earlier and turn.asked == turn.utterance.segments[-1]
    assert turn.earlier_answer


def test_a_wrong_fact_is_wrong_and_a_hand_over_to_what_the_file_cannot_answer_is_right():
    bikes = next(t for t in CORPUS if t.id == "two-city-bikes")
    assert grade_turn(bikes, "That would be 60 dollars.", BUSINESS) == "wrong"
    assert grade_turn(bikes, None, BUSINESS) == "no_answer"
    unknown = next(t for t in CORPUS if t.question.unknown)
    assert grade_turn(unknown, BUSINESS.transfer_text, BUSINESS) == "right"
    assert grade_turn(unknown, "Yes, we do that for 20 dollars.", BUSINESS) == "wrong"


@pytest.mark.parametrize("change, complaint", [
    ({"needs": "guess"}, "'needs' is one of"),
    ({"answer": ""}, "'answer'"),
    ({"needs": "follow-up"}, "a follow-up says two turns"),
    ({"must": [["("]]}, "question broken"),
])
def test_a_broken_corpus_is_refused_naming_the_turn(tmp_path, change, complaint):
    import yaml

    turn = {"id": "broken", "needs": "compose", "say": "How much for two?", "must": [["40"]], "answer": "40 dollars."}
    path = tmp_path / "shop.bench.yaml"
    path.write_text(yaml.safe_dump({"turns": [{**turn, **change}]}))
    with pytest.raises(QuestionsError, match="broken") as error:
        load_corpus(path)
    assert complaint in str(error.value)


def test_a_quick_run_keeps_every_third_turn_and_turns_cycle():
    quick = select_turns(CORPUS, None, quick=True)
    assert [t.id for t in quick] == [t.id for t in CORPUS[::3]]
    assert select_turns(CORPUS, len(CORPUS) + 1, quick=False)[-1] == CORPUS[0]


@pytest.mark.parametrize("intent, path", [
    (None, "llm"), ("hours", "fast_path"), ("unsure:rentals", "fast_path"), ("unknown", "fast_path"),
    ("person", "tool"), ("booking", "tool"),
])
def test_a_turn_is_put_down_to_the_path_that_answered_it(intent, path):
    assert path_of({"fast_path": intent}, BUSINESS) == path


def _turn(pair, side, path, grade, v2v):
    return {"pair": pair, "side": side, "path": path, "grade": grade, "v2v_ms": v2v, "answered": v2v is not None}


def test_speed_is_over_right_answers_and_the_llm_ratio_over_the_utterances_brisks_llm_answered():
    turns = [
        _turn(0, "stock", "llm", "right", 1500), _turn(0, "brisk", "llm", "right", 750),
        _turn(1, "stock", "llm", "right", 1600), _turn(1, "brisk", "llm", "refused", 900),
        _turn(2, "stock", "llm", "wrong", 1400), _turn(2, "brisk", "fast_path", "right", 500),
    ]
    brisk = [t for t in turns if t["side"] == "brisk"]
    assert graded(brisk) | {"v2v_ms_right": None} == {"right": 2, "wrong": 0, "refused": 1, "incomplete": 0,
                                                       "no_answer": 0, "v2v_ms_right": None}
    assert graded(brisk)["v2v_ms_right"]["n"] == 2 and graded(brisk)["v2v_ms_right"]["p50"] == 625
    paths = by_path(brisk)
    assert (paths["llm"]["n"], paths["llm"]["right"], paths["fast_path"]["n"], paths["tool"]["n"]) == (2, 1, 1, 0)
    ratio = ratio_llm(turns)
    # Utterances 0 and 1 (Brisk's LLM answered them), not 2 (its fast path did).
    assert ratio["n"] == 2 and ratio["v2v_p50"] == pytest.approx((750 + 900) / (1500 + 1600), abs=0.01)
    assert ratio["v2v_p50_ci95"][0] <= ratio["v2v_p50"] <= ratio["v2v_p50_ci95"][1]


async def _ask(client, text):
    started = time.monotonic()
    stream = await client.chat.completions.create(
        model="reference", stream=True,
        messages=[{"role": "system", "content": "You answer for a bike shop."}, {"role": "user", "content": text}])
    first, words = None, []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic() - started
            words.append(chunk.choices[0].delta.content)
    return "".join(words).strip(), first


async def test_the_reference_llm_answers_what_was_heard_with_its_right_answer_to_two_callers_at_once():
    server = reference_llm(CORPUS, ttft_ms=200)
    async with serve_app(server.app()) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="none")
        follow_up = next(t for t in CORPUS if t.needs == "follow-up")
        asked = await asyncio.gather(
            _ask(client, "How much would it be to rent two city bikes for three day?"),  # misheard a little
            _ask(client, follow_up.earlier),
            _ask(client, "What colour is the sky on Mars?"),
        )
    bikes = next(t for t in CORPUS if t.id == "two-city-bikes")
    assert [a for a, _ in asked] == [bikes.answer, follow_up.earlier_answer, DONT_KNOW]
    # Each request draws its own first-token time around the median, as a cloud API's vary.
    ttfts = [r.ttft_s for r in server.requests]
    assert len(set(ttfts)) == 3 and all(0.05 < t < 1.0 for t in ttfts)
    assert all(60 <= r.tokens_per_s <= 80 for r in server.requests)

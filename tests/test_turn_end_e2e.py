"""Over a real call, a caller who pauses mid-sentence gets one answer, to the whole question,
after they have finished: the examples of issue 15, spoken by espeak with real pauses."""

import numpy as np
import pytest

from agent.audio import espeak_speech
from agent.bench.scripted_llm import ScriptedLLM
from agent.bench.corpus import spoken
from agent.bench.turns import render_turn
from agent.caller.call import place_call, report
from tests.servers import brisk_with_llm

pytestmark = pytest.mark.e2e
RATE = 16000


def spoken_with_pauses(*parts, voice="en-us"):
    """(samples, [end of each part in seconds]): the parts joined by the pauses between them."""
    pieces, ends, t = [np.zeros(RATE, dtype=np.int16)], [], 1.0
    for part in parts:
        if isinstance(part, float):
            pieces.append(np.zeros(int(part * RATE), dtype=np.int16))
            t += part
        else:
            speech = espeak_speech(part, voice=voice, rate=RATE)
            pieces.append(speech)
            t += len(speech) / RATE
            ends.append(t)
    pieces.append(np.zeros(int(1.5 * RATE), dtype=np.int16))
    return np.concatenate(pieces), ends


def answered(result) -> list[dict]:
    return [t for t in result.summary["turns"] if t["bot_text"] and not t["interrupted"]]


def recorded_with_a_pause(pause_ms: int):
    """The CMU ARCTIC recording, a real voice, with a pause put into its comma's gap."""
    clip = render_turn(spoken("arctic", "paused", "arctic", 0, "He turned sharply,", pause_ms,
                              "and faced Gregson across the table."))
    return clip.samples, [clip.speech_end_s]


@pytest.mark.parametrize("parts", [
    ("My order number is", 0.9, "four five seven two, and I want to know where it is."),
    # "Saturday." ends the turn and opens the booking; going on takes that call back.
    ("I would like to rent two bikes for Saturday,", 0.8, "and a child seat if you have one."),
    "recorded",
], ids=["order-number", "rental", "recorded-speech"])
async def test_a_pause_mid_sentence_gets_one_answer_to_the_whole_question_after_the_caller_finished(parts):
    llm = ScriptedLLM(ttft_s=0.2, tokens_per_s=40.0,
                      answer_for=lambda m: f"You asked: {[x for x in m if x['role'] == 'user'][-1]['content']}")
    samples, ends = recorded_with_a_pause(1100) if parts == "recorded" else spoken_with_pauses(*parts)
    if parts == "recorded":
        parts = ("He turned sharply,", "and faced Gregson across the table.")
    async with brisk_with_llm(llm.app()) as (base_url, app):
        result = await place_call(base_url, app, samples, RATE)
    server = result.summary["turns"]
    # One answer that was heard to its end, and it answers all of it: the caller's last words are
    # in the turn it answers, or that turn continued the one cut by the pause (merged).
    [turn] = answered(result)
    last_word = parts[-1].split()[-1].strip(".,").lower()
    assert last_word in turn["user_text"].lower(), server
    assert turn["merged"] or len(server) == 1, server
    if "child seat" in parts[-1]:
        # The booking opened for the whole request, and the caller hears the seat is not known here.
        assert "child seat" in turn["bot_text"] and "Which bike" in turn["bot_text"], turn
    # Any bot audio before the caller finished is the first moments of an answer the pause cut,
    # and that answer is cut, not finished.
    spoken_end = result.utterance_ends[-1]
    early = [s for s in result.caller.audible_spans() if s[0] < spoken_end]
    assert sum(end - start for start, end in early) < 1.5, early
    assert all(t["interrupted"] for t in server if t is not turn), server
    # agent call --json reports every turn the server saw, flagged as the server flagged them.
    out = report(result)
    assert len(out["turns"]) == len(server) and out["utterances"] == 1
    assert [(t["interrupted"], t["merged"]) for t in out["turns"]] == [(r["interrupted"], r["merged"]) for r in server]

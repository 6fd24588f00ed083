"""``agent bench``: the corpus, the statistics, the LLM meters, and one real quick run's JSON contract.

The benchmark is a command, not a timed test: nothing here asserts a speed. The end-to-end test
runs ``python -m agent bench --quick --turns 2`` (real WebRTC calls to a stock and a Brisk
server, scripted LLM) and checks that its JSON has every field with sane values.
"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


from agent.bench.ab import parse_args
from agent.bench.calls import answering_record, answers_into_a_pause, heard_answer, measured_turn_start_s, rebased_stages
from agent.bench.corpus import CORPUS, LEAD_SILENCE_S, QUICK_IDS, TAIL_SILENCE_S, render, select
from agent.bench.meters import (
    LLM_KEYS,
)
from agent.bench.report import WAYPOINTS, summarize_side
from agent.bench.stats import bootstrap_ratio, percentiles, word_error_rate
from agent.caller.aiortc_caller import ReceivedAudio
from processors.speculation.speculation_stats import merge_reports

REPO = Path(__file__).resolve().parent.parent


# -- corpus ------------------------------------------------------------------------------------


def test_the_corpus_has_twenty_turns_of_every_kind_in_several_voices():
    assert len(CORPUS) >= 20
    assert len({u.id for u in CORPUS}) == len(CORPUS)
    assert {"short", "long", "filler", "pause", "recorded"} <= {u.kind for u in CORPUS}
    assert len({u.voice for u in CORPUS if u.voice != "arctic"}) >= 5
    assert len({u.wpm for u in CORPUS if u.wpm}) >= 5
    pauses = [p for u in CORPUS for p in u.pauses_ms]
    assert pauses and all(300 <= p <= 600 for p in pauses)
    assert any(u.text.lower().startswith(("um", "uh")) or " um" in u.text.lower() for u in CORPUS)


def test_quick_takes_eight_turns_of_the_corpus_and_turns_cycles_it():
    quick = select(None, quick=True)
    assert [u.id for u in quick] == list(QUICK_IDS) and len(quick) == 8
    assert select(2, quick=True) == quick[:2]
    assert select(len(CORPUS) + 1, quick=False)[-1] == CORPUS[0]
    with pytest.raises(ValueError):
        select(0, quick=False)


def test_a_turn_with_pauses_is_silent_after_its_last_segment_and_in_its_pauses(tmp_path):
    utterance = next(u for u in CORPUS if u.kind == "pause")
    clip = render(utterance, cache_dir=tmp_path)
    rate = clip.sample_rate
    last = round(clip.last_voiced_s * rate)

    assert not clip.samples[last:].any() and clip.samples[last - 1] != 0
    assert len(clip.samples) - last == round(TAIL_SILENCE_S * rate)
    assert not clip.samples[: round(LEAD_SILENCE_S * rate)].any()
    # The end found from the samples is in the last segment, not at the pause.
    assert clip.last_voiced_s - 0.5 < clip.speech_end_s <= clip.last_voiced_s + 0.01  # 10 ms windows
    # The mid-sentence pause is exact digital silence of the stated length.
    voiced = np.flatnonzero(clip.samples)
    gaps = np.diff(voiced) - 1
    assert gaps.max() == round(utterance.pauses_ms[0] / 1000 * rate)


def test_a_rendered_turn_is_cached_and_read_back_identically(tmp_path):
    first = render(CORPUS[0], cache_dir=tmp_path)
    again = render(CORPUS[0], cache_dir=tmp_path)
    assert again.path == first.path
    assert np.array_equal(again.samples, first.samples)
    assert again.speech_end_s == first.speech_end_s


def test_the_recorded_arctic_clip_is_in_the_corpus_with_its_end_found_from_the_samples(tmp_path):
    utterance = next(u for u in CORPUS if u.kind == "recorded")
    clip = render(utterance, cache_dir=tmp_path)
    assert LEAD_SILENCE_S < clip.speech_end_s < clip.duration_s


def test_quick_means_eight_scripted_turns_unless_told_otherwise():
    quick = parse_args(["--quick"])
    assert (quick.llm, quick.turns) == ("scripted", 8)
    assert parse_args(["--quick", "--llm", "embedded", "--turns", "2"]).llm == "embedded"
    full = parse_args([])
    assert (full.llm, full.turns) == ("embedded", None)
    with pytest.raises(SystemExit):
        parse_args(["--turns", "0"])


def test_the_threads_suite_measures_the_embedded_server_and_takes_nothing_but_json():
    assert parse_args(["--suite", "threads", "--json", "t.json"]).suite == "threads"
    for extra in (["--llm", "scripted"], ["--turns", "3"], ["--quick"]):
        with pytest.raises(SystemExit):
            parse_args(["--suite", "threads", *extra])



def test_the_phone_and_overhead_suites_take_their_own_options_only():
    phone = parse_args(["--suite", "phone", "--quick", "--whisper-model", "base", "--json", "p.json"])
    assert (phone.suite, phone.whisper_model, phone.quick) == ("phone", "base", True)
    overhead = parse_args(["--suite", "overhead", "--frames", "200", "--repeats", "2"])
    assert (overhead.suite, overhead.frames, overhead.repeats) == ("overhead", 200, 2)
    for wrong in (["--suite", "phone", "--llm", "scripted"], ["--suite", "overhead", "--turns", "3"],
                  ["--whisper-model", "base"], ["--suite", "phone", "--frames", "10"]):
        with pytest.raises(SystemExit):
            parse_args(wrong)

# -- statistics --------------------------------------------------------------------------------


def test_the_bootstrap_ratio_recovers_a_known_speed_up_and_brackets_it():
    rng = np.random.default_rng(1)
    stock = list(rng.uniform(2000, 4000, 24))
    noisy = [v * f for v, f in zip(stock, rng.uniform(0.4, 0.6, 24))]
    ratio, (lo, hi) = bootstrap_ratio(stock, noisy, 50, resamples=500)
    assert 0.4 < lo <= ratio <= hi < 0.6
    # Exactly twice as fast on every utterance: every draw says 0.5, so the interval is the point.
    assert bootstrap_ratio(stock, [v / 2 for v in stock], 50) == (0.5, [0.5, 0.5])
    assert bootstrap_ratio(stock, [v / 2 for v in stock], 95) == (0.5, [0.5, 0.5])


def test_the_bootstrap_draws_are_paired_and_seeded():
    rng = np.random.default_rng(2)
    stock = list(rng.uniform(2000, 4000, 16))
    brisk = list(rng.uniform(1000, 2000, 16))
    assert bootstrap_ratio(stock, brisk, 50, seed=3) == bootstrap_ratio(stock, brisk, 50, seed=3)
    # Paired: the same utterance's two values move together, so a brisk that is stock's own
    # values halved has no spread, while the same halved values shuffled across utterances do.
    shuffled = list(rng.permutation([v / 2 for v in stock]))
    _, (lo, hi) = bootstrap_ratio(stock, shuffled, 50)
    assert lo < 0.5 < hi


def test_an_unanswered_turn_leaves_only_its_own_side_out_of_the_ratio():
    ratio, (lo, hi) = bootstrap_ratio([1000.0, None, 3000.0], [500.0, 700.0, None], 50, resamples=200)
    assert ratio == pytest.approx(np.median([500.0, 700.0]) / np.median([1000.0, 3000.0]))
    assert lo <= ratio <= hi
    assert bootstrap_ratio([None, None], [500.0, 700.0], 50) == (None, None)
    assert bootstrap_ratio([1000.0], [250.0], 50) == (0.25, [0.25, 0.25])


def test_percentiles_describe_what_was_measured():
    assert percentiles([None, None]) == {"p50": None, "p95": None, "mean": None, "n": 0}
    summary = percentiles([100.0, None, 300.0])
    assert (summary["p50"], summary["mean"], summary["n"]) == (200.0, 200.0, 2)
    assert summary["p50"] <= summary["p95"] <= 300.0


def test_unanswered_turns_are_counted_not_dropped_and_left_out_of_v2v():
    def turn(v2v):
        return {
            "answered": v2v is not None, "outcome": "answered" if v2v is not None else "no_audio",
            "cut": False, "wer": 0.0, "pipeline_turns": 1,
            "v2v_ms": v2v, "stages_ms": {s: None for s in WAYPOINTS},
            "cpu_s": {"agent": 1.0, "llm_server": None},
            "llm": {"requests": 1, "prompt_tokens": 10, "completion_tokens": 5, "cancelled": 0, "cached": None},
        }

    side = summarize_side([turn(1000.0), turn(None), turn(3000.0)])
    assert (side["turns"], side["answered"], side["unanswered"]) == (3, 2, 1)
    assert side["v2v_ms"]["mean"] == 2000.0 and side["v2v_ms"]["n"] == 2
    assert side["llm_totals"]["requests"] == 3 and side["llm_totals"]["completion_tokens"] == 15
    # One unknown count makes the total unknown, not smaller.
    assert side["llm_totals"]["cached"] is None


def test_speculation_is_reported_over_the_llms_turns_with_its_hits_apart():
    def turn(v2v, *, committed=0, cancelled=0, fast_path=None):
        stages = {s: None for s in WAYPOINTS} | {"turn_end": 500.0, "first_audio_out": v2v - 200.0}
        return {
            "answered": True, "outcome": "answered", "cut": False, "wer": 0.0, "pipeline_turns": 1,
            "v2v_ms": v2v, "stages_ms": stages, "cpu_s": {"agent": 1.0, "llm_server": None}, "llm": {},
            "fast_path": fast_path, "speculative": bool(committed),
            "speculation": None if fast_path else merge_reports([]) | {
                "drafts_started": committed + cancelled, "committed": committed, "cancelled": cancelled,
                "superseded": 0, "time_saved_ms": []},
        }

    side = summarize_side([turn(900.0, committed=1), turn(1500.0, cancelled=1), turn(1700.0),
                           turn(600.0, fast_path="hours")])
    assert side["draft_at_turn_end"] == 0.667  # two of the three LLM turns; the fast path's is not one
    assert side["hits_v2v_ms"]["n"] == 1 and side["hits_v2v_ms"]["p50"] == 900.0
    assert side["hits_turn_end_to_audio_ms"]["p50"] == 200.0
    assert "hits_v2v_ms" not in summarize_side([turn(600.0, fast_path="hours")])


def test_the_fast_paths_hits_are_its_turns_whose_held_answer_was_kept():
    def turn(first_audio_out, *, committed):
        stages = {s: None for s in WAYPOINTS} | {"turn_end": 500.0, "first_audio_out": first_audio_out}
        return {
            "answered": True, "outcome": "answered", "cut": False, "wer": 0.0, "pipeline_turns": 1,
            "v2v_ms": first_audio_out + 150.0, "stages_ms": stages, "cpu_s": {"agent": 1.0, "llm_server": None},
            "llm": {}, "fast_path": "unknown", "speculative": False,
            "speculation": merge_reports([]) | {"drafts_started": 1, "committed": committed,
                                                "cancelled": 1 - committed, "superseded": 0, "time_saved_ms": []},
        }

    side = summarize_side([turn(560.0, committed=1), turn(580.0, committed=1), turn(800.0, committed=0)])
    assert side["fast_path_hits_turn_end_to_audio_ms"]["n"] == 2
    assert side["fast_path_hits_turn_end_to_audio_ms"]["p50"] == 70.0
    assert "hits_v2v_ms" not in side  # no LLM turn
    assert "fast_path_hits_turn_end_to_audio_ms" not in summarize_side([turn(800.0, committed=0)])


def counted_turn(**counters) -> dict:
    """One answered bench turn carrying per-call counters (``tts_prefetch=...``)."""
    return {
        "answered": True, "outcome": "answered", "cut": False, "wer": 0.0, "pipeline_turns": 1,
        "v2v_ms": 800.0, "stages_ms": {s: None for s in WAYPOINTS},
        "cpu_s": {"agent": 1.0, "llm_server": None}, "llm": {}, **counters,
    }


@pytest.mark.parametrize("key, calls, total", [
    ("tts_prefetch",  # the held drafts' first chunks synthesised ahead (processors/speculation/speculative_tts.py)
     [{"started": 1, "used": 1, "discarded": 0, "missed": 0}, {"started": 2, "used": 0, "discarded": 2, "missed": 0}],
     {"started": 3, "used": 1, "discarded": 2, "missed": 0}),
    ("facts_prefill",  # the facts read during speech (processors/llm/facts_prefill.py)
     [{"prefills": 2, "skipped": 1, "failures": 0, "prefill_s": 0.75}, {"prefills": 1, "skipped": 0, "failures": 1, "prefill_s": 0.25}],
     {"prefills": 3, "skipped": 1, "failures": 1, "prefill_s": 1.0}),
])
def test_per_call_counters_are_totalled_over_the_calls_that_kept_them(key, calls, total):
    turns = [counted_turn(**{key: counters}) for counters in (*calls, None)]
    assert summarize_side(turns)[key] == total
    assert summarize_side([counted_turn(**{key: None})])[key] is None


def test_word_error_rate_counts_substitutions_insertions_and_deletions_per_reference_word():
    assert word_error_rate("What time do you open?", "what time do you open") == 0
    assert word_error_rate("do you ship to Canada", "do you fit your can") == pytest.approx(3 / 5)
    assert word_error_rate("I lost the receipt", "I lost receipt") == pytest.approx(1 / 4)
    assert word_error_rate("where is my order", "") == 1


def test_word_error_rate_ignores_case_and_punctuation_but_not_apostrophes():
    assert word_error_rate("Open nine-to-six, Monday!", "open nine to six monday") == 0
    assert word_error_rate("  Don't   go. ", "don't go") == 0
    assert word_error_rate("don't go", "dont go") == pytest.approx(1 / 2)
    # No reference words: what was heard counts as insertions over one word.
    assert word_error_rate("", "") == 0
    assert word_error_rate("?!", "hello there") == 2
    assert word_error_rate(None, "hi") == 1


def test_stages_are_rebased_on_the_true_end_of_speech():
    # The server measured from its VAD estimate at t0 = 100.0 s; the speech really ended at 99.9 s.
    record = {"t0_monotonic": 100.0, "stages_ms": {"vad_stop": 200.0, "first_audio_out": 900.0}}
    stages = rebased_stages(record, end=99.9)
    assert stages["speech_end"] == 0.0
    assert stages["vad_stop"] == pytest.approx(300.0)
    assert stages["first_audio_out"] == pytest.approx(1000.0)
    assert stages["llm_request"] is None


def test_the_answer_is_the_record_whose_audio_came_after_the_end_of_speech():
    fragment = {"t0_monotonic": 10.0, "stages_ms": {"first_audio_out": None}, "user_text": "I'd like"}
    answer = {"t0_monotonic": 12.0, "stages_ms": {"first_audio_out": 800.0}, "user_text": "a refund"}
    assert answering_record([fragment, answer], end=12.0) is answer
    assert answering_record([fragment], end=12.0) is fragment
    assert answering_record([], end=12.0) is None


def test_audio_still_playing_at_the_end_of_speech_is_not_heard_as_the_answer():
    # The greeting plays on past the end of speech (12.0 s); the answer leaves the server at 12.8 s.
    loud, quiet = np.full(320, 3000, dtype=np.int16), np.zeros(320, dtype=np.int16)
    received = [ReceivedAudio(t, pcm, 16000) for t, pcm in
                ((11.9, loud), (12.05, loud), (12.3, quiet), (12.85, quiet), (12.9, loud))]
    answer = {"t0_monotonic": 12.0, "stages_ms": {"first_audio_out": 800.0}}
    assert heard_answer(received, first=12.05, record=answer) == 12.9
    assert heard_answer(received, first=12.9, record=answer) == 12.9  # heard after it was sent: as it is
    assert heard_answer(received, first=12.05, record={"stages_ms": {}}) == 12.05  # nothing to tell by
    assert heard_answer(received[:3], first=12.05, record=answer) is None  # the answer never came


def test_a_fragment_whose_answer_went_out_before_the_speech_ended_is_an_answer_into_the_pause():
    spoken_into_it = {"t0_monotonic": 10.0, "stages_ms": {"first_audio_out": 500.0}}
    cut_before_audio = {"t0_monotonic": 11.0, "stages_ms": {"first_audio_out": None}}
    answer = {"t0_monotonic": 12.0, "stages_ms": {"first_audio_out": 800.0}}
    assert answers_into_a_pause([spoken_into_it, cut_before_audio, answer], end=12.0) == 1
    assert answers_into_a_pause([answer], end=12.0) == 0
    # A follow-up: the first question's answer went out before the second question began.
    first_question = {"t0_monotonic": 2.0, "stages_ms": {"first_audio_out": 600.0}}
    assert answers_into_a_pause([first_question, spoken_into_it, answer], end=12.0, since=9.0) == 1


def test_a_follow_ups_measured_turn_begins_after_its_long_silence():
    from agent.bench.corpus import Clip, spoken

    samples = np.concatenate([np.zeros(1600), np.ones(3200), np.zeros(128000), np.ones(4800), np.zeros(800)])
    follow_up = spoken("f", "follow-up", "en-us", 160, "Open Saturday?", 8000, "And close?")
    clip = Clip(follow_up, samples.astype(np.int16), 16000, 10.5, 10.5, None)
    assert measured_turn_start_s(clip) == pytest.approx((1600 + 3200 + 128000) / 16000)
    assert measured_turn_start_s(Clip(spoken("s", "short", "en-us", 160, "Hi"), samples.astype(np.int16),
                                      16000, 10.5, 10.5, None)) is None


# -- LLM and CPU accounting -----------------------------------------------------------------------


def test_each_interruption_is_put_down_to_the_utterance_said_last_before_its_decision():
    from agent.bench.barge_in import Spoken, measure
    from processors.barge_in.playback_tracker import BotTurn, Interruption

    said = [Spoken("question", "q", 0.0, 1.0), Spoken("interjection", "wait", 10.0, 10.8),
            Spoken("backchannel", "uh huh", 20.0, 20.4), Spoken("interjection", "stop", 22.0, 22.6)]
    cut = Interruption(turn_id=1, phase="playback", decided_at=10.7, last_audio_out_at=10.71)
    false = Interruption(turn_id=2, phase="playback", decided_at=20.5, last_audio_out_at=20.5)
    turns = [BotTurn(1, "answer", first_audio_out_at=2.0), BotTurn(2, "answer", first_audio_out_at=12.0),
             BotTurn(3, "answer", first_audio_out_at=21.5)]
    loud, quiet = np.full(960, 3000, np.int16), np.zeros(960, np.int16)
    # Turn 2 went out for the last time at 20.5 s: audible audio at 21.0 s, before turn 3 began, is stale.
    received = [ReceivedAudio(10.72, loud, 48000), ReceivedAudio(11.0, quiet, 48000),
                ReceivedAudio(21.0, loud, 48000), ReceivedAudio(21.6, loud, 48000)]

    result = measure(said, [cut, false], turns, 2, received, ended_at=30.0, requested=2, stale_speech_ended=1)

    assert result["backchannel_false_interruptions"] == 1
    assert result["interjections"] == 2 and result["interjections_missed"] == 1
    assert result["decision_ms"]["p50"] == pytest.approx(700.0) and result["decision_ms"]["n"] == 1
    assert result["stop_ms"]["p50"] == pytest.approx(10.0)
    assert (result["stale_frames_server"], result["stale_frames_caller"], result["stale_frames"]) == (2, 1, 3)
    assert result["stale_speech_ended"] == 1
    assert result["per_backchannel"] == [{"text": "uh huh", "interrupted_on": [""]}]


# -- the real thing ----------------------------------------------------------------------------


def _ordered(values):
    present = [v for v in values if v is not None]
    return present == sorted(present)


@pytest.mark.e2e
async def test_each_sides_calls_run_under_its_own_blas_thread_count(monkeypatch):
    from threadpoolctl import threadpool_limits

    import agent.bench.calls as calls
    from agent.runtime.runtime import blas_threads

    seen = {}

    async def call(side, *_):
        await asyncio.sleep(0)
        seen[side.flavor] = blas_threads()
        return {}

    monkeypatch.setattr(calls, "bench_call", call)
    sides = {f: calls.Side(f, "http://127.0.0.1:1", None) for f in ("stock", "brisk")}
    rig = calls.Rig(sides, None, None, None, None, blas_threads={"stock": 2, "brisk": 1})
    before = blas_threads()
    try:
        with threadpool_limits(limits=1, user_api="blas"):  # as Brisk's runtime leaves the process
            for flavor in ("stock", "brisk", "stock"):
                await rig.call(flavor, None)
            assert blas_threads() == 1
        assert seen == {"stock": 2, "brisk": 1}
    finally:
        assert blas_threads() == before


def test_quick_bench_writes_the_json_contract_with_sane_values(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    run = subprocess.run(
        [sys.executable, "-m", "agent", "bench", "--quick", "--turns", "2", "--json", str(out), "--plot", str(png)],
        cwd=REPO, capture_output=True, text=True, timeout=420,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "voice-to-voice" in run.stdout and "B/A" in run.stdout

    result = json.loads(out.read_text())
    assert {"stock", "stock_tuned", "brisk", "ratio", "ratio_tuned", "turns", "machine", "config"} <= set(result)
    assert "B/T" in run.stdout
    for flavor in ("stock", "stock_tuned", "brisk"):
        side = result[flavor]
        assert set(side["v2v_ms"]) >= {"p50", "p95", "mean"}
        assert set(side["stages_ms"]) == set(WAYPOINTS)
        assert side["turns"] == 2 and side["answered"] + side["unanswered"] == 2
        assert side["v2v_ms"]["p50"] > 0
        assert side["v2v_ms"]["p50"] <= side["v2v_ms"]["p95"]
    assert result["ratio"]["v2v_p50"] > 0 and result["ratio"]["v2v_p95"] > 0
    assert result["ratio_tuned"]["v2v_p50"] > 0 and result["ratio_tuned"]["method"].startswith("brisk/stock_tuned")
    assert result["config"]["llm"] == "scripted"
    # Graded, and split by what answered: every turn counted once, stock only ever by its LLM.
    assert "ratio_llm" in run.stdout and set(result["ratio_llm"]) >= {"n", "v2v_p50", "v2v_p50_ci95"}
    for flavor in ("stock", "stock_tuned", "brisk"):
        graded, paths = result[flavor]["graded"], result[flavor]["by_path"]
        assert sum(graded[g] for g in ("right", "wrong", "refused", "incomplete", "no_answer")) == 2
        assert sum(paths[p]["n"] for p in ("fast_path", "tool", "llm")) == 2
    assert result["stock"]["by_path"]["llm"]["n"] == 2
    assert all(t["path"] == "llm" for t in result["turns"] if t["side"] != "brisk")
    assert all(t["grade"] in {"right", "wrong", "refused", "incomplete", "no_answer"} and t["needs"] for t in result["turns"])
    # The scripted LLM reports usage like OpenAI, so the tokens are the server's own count.
    assert result["config"]["llm_tokens_source"] == "usage"

    turns = result["turns"]
    assert len(turns) == 6
    # Interleaved per utterance: every side hears utterance 0, then every side hears utterance 1.
    assert [t["pair"] for t in turns] == [0, 0, 0, 1, 1, 1]
    assert {t["side"] for t in turns[:3]} == {t["side"] for t in turns[3:]} == {"stock", "stock_tuned", "brisk"}
    assert turns[0]["side"] != turns[3]["side"]  # who goes first rotates
    for t in turns:
        assert t["outcome"] in {"answered", "no_audio", "no_llm_answer"}
        if not t["answered"]:
            continue
        s = t["stages_ms"]
        assert t["v2v_ms"] > 0
        assert _ordered([s["vad_stop"], s["turn_end"]])
        assert _ordered([s["llm_request"], s["llm_first_token"], s["tts_first_audio"], s["first_audio_out"]])
        # The caller cannot hear audio before the server sent it.
        assert s["first_audio_out"] is None or s["first_audio_out"] <= t["v2v_ms"]
        assert set(t["llm"]) == set(LLM_KEYS)
        assert t["cpu_s"]["agent"] > 0
        if t["fast_path"]:  # answered from the business's facts: the LLM was not asked
            assert t["side"] == "brisk" and s["llm_request"] is None
            continue
        assert t["llm"]["requests"] >= 1 and t["llm"]["completion_tokens"] >= 1
        assert t["llm"]["prompt_tokens"] >= t["llm"]["prompt_tokens_computed"] >= 1

    barge_in = result["brisk"]["barge_in"]
    assert "barge_in" not in result["stock"]
    assert {"stop_ms", "decision_ms", "stale_frames", "backchannel_false_interruptions"} <= set(barge_in)
    for key in ("stop_ms", "stop_at_caller_ms", "decision_ms"):
        assert {"p50", "p95"} <= set(barge_in[key])
        assert barge_in[key]["n"] >= 1 and 0 <= barge_in[key]["p50"] <= barge_in[key]["p95"]
    assert barge_in["interjections"] == barge_in["interruptions_requested"] >= 3
    assert barge_in["backchannels"] >= 3
    assert barge_in["stale_frames"] == barge_in["stale_frames_server"] + barge_in["stale_frames_caller"]
    assert "Barge-in" in run.stdout and "scripted" in barge_in["llm"]

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["processor_overhead"]["processors"]
    # Brisk's calls ran with its BLAS limit, the stock sides with numpy's own thread count.
    blas = result["machine"]["blas_threads"]
    assert blas["brisk"] == 1 and blas["stock"] == blas["stock_tuned"] >= 1

    phone = result["phone"]
    assert "Phone path" in run.stdout
    for path, rate in (("web_16k", 16000), ("phone_8k_ulaw", 8000)):
        row = phone[path]
        assert row["sample_rate"] == rate and len(row["turns"]) == 2
        assert row["first_partial_ms"]["n"] >= 1 and row["first_partial_ms"]["p50"] > 0
        # Nothing buffers audio inside the STT at either rate: every partial starts on all of it
        # but at most the one 20 ms frame in transit (a stream resampler held back up to 111).
        assert row["held_back_ms"]["n"] >= 1 and row["held_back_ms"]["max"] <= 20.0
        assert 0 <= row["final_wer"] <= 1
    assert set(phone["whole_clip_wer"]) == {"16k_pcm", "8k_pcm", "8k_ulaw"}


@pytest.mark.e2e
def test_the_capacity_bench_places_calls_at_once_and_writes_each_level(tmp_path):
    out = tmp_path / "capacity.json"
    run = subprocess.run(
        [sys.executable, "-m", "agent", "bench", "--llm", "scripted", "--concurrency", "2,1", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=280,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Capacity" in run.stdout

    levels = json.loads(out.read_text())["concurrency"]
    assert list(levels) == ["1", "2"]
    for n, level in levels.items():
        assert level["calls"] == int(n) and level["turns"] == int(n) * 3
        assert len(level["per_call"]) == int(n)
        # Every question is answered, in full, whoever else is on the line.
        assert level["answered"] == level["turns"] and level["answers_cut_short"] == 0
        assert 0 < level["v2v_ms"]["p50"] <= level["v2v_ms"]["p95"]
    assert levels["1"]["p95_vs_one_call"] == 1.0


def test_concurrency_levels_are_counts_of_calls():
    from agent.bench.ab import parse_args

    assert parse_args(["--concurrency", "4,1,2,2"]).concurrency == [1, 2, 4]
    for bad in ("0", "two", ""):
        with pytest.raises(SystemExit):
            parse_args(["--concurrency", bad])

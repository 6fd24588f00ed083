"""``agent bench``: the corpus, the statistics, and one real quick run's JSON contract.

The benchmark is a command, not a timed test: nothing here asserts a speed. The end-to-end test
runs ``python -m agent bench --quick --turns 2`` (real WebRTC calls to a stock and a Brisk
server, scripted LLM) and checks that its JSON has every field with sane values.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.bench import (
    WAYPOINTS,
    LlamaLogMeter,
    _answering_record,
    _rebased_stages,
    bootstrap_ratio,
    parse_args,
    summarize_side,
    word_error_rate,
)
from agent.bench_corpus import CORPUS, LEAD_SILENCE_S, QUICK_IDS, TAIL_SILENCE_S, render, select

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


# -- statistics --------------------------------------------------------------------------------


def test_the_bootstrap_ratio_recovers_a_known_speed_up_and_brackets_it():
    rng = np.random.default_rng(1)
    stock = list(rng.uniform(2000, 4000, 24))
    brisk = [v / 2 for v in stock]
    ratio, (lo, hi) = bootstrap_ratio(stock, brisk, 50, resamples=500)
    assert ratio == pytest.approx(0.5, abs=1e-3)
    assert lo <= ratio <= hi


def test_unanswered_turns_are_counted_not_dropped_and_left_out_of_v2v():
    def turn(v2v):
        return {
            "answered": v2v is not None, "outcome": "answered" if v2v is not None else "no_audio",
            "cut": False, "wer": 0.0, "pipeline_turns": 1,
            "v2v_ms": v2v, "stages_ms": {s: None for s in WAYPOINTS},
            "cpu_s": {"agent": 1.0, "llm_server": None},
            "llm": {"requests": 1, "prompt_tokens": 10, "completion_tokens": 5, "cancelled": 0},
        }

    side = summarize_side([turn(1000.0), turn(None), turn(3000.0)])
    assert (side["turns"], side["answered"], side["unanswered"]) == (3, 2, 1)
    assert side["v2v_ms"]["mean"] == 2000.0 and side["v2v_ms"]["n"] == 2
    assert side["llm_totals"]["requests"] == 3
    ratio, _ = bootstrap_ratio([1000.0, None, 3000.0], [500.0, 700.0, None], 50, resamples=50)
    assert ratio == pytest.approx(np.median([500.0, 700.0]) / np.median([1000.0, 3000.0]))


def test_word_error_rate_counts_substitutions_insertions_and_deletions_per_reference_word():
    assert word_error_rate("What time do you open?", "what time do you open") == 0
    assert word_error_rate("do you ship to Canada", "do you fit your can") == pytest.approx(3 / 5)
    assert word_error_rate("I lost the receipt", "I lost receipt") == pytest.approx(1 / 4)
    assert word_error_rate("where is my order", "") == 1


def test_stages_are_rebased_on_the_true_end_of_speech():
    # The server measured from its VAD estimate at t0 = 100.0 s; the speech really ended at 99.9 s.
    record = {"t0_monotonic": 100.0, "stages_ms": {"vad_stop": 200.0, "first_audio_out": 900.0}}
    stages = _rebased_stages(record, end=99.9)
    assert stages["speech_end"] == 0.0
    assert stages["vad_stop"] == pytest.approx(300.0)
    assert stages["first_audio_out"] == pytest.approx(1000.0)
    assert stages["llm_request"] is None


def test_the_answer_is_the_record_whose_audio_came_after_the_end_of_speech():
    fragment = {"t0_monotonic": 10.0, "stages_ms": {"first_audio_out": None}, "user_text": "I'd like"}
    answer = {"t0_monotonic": 12.0, "stages_ms": {"first_audio_out": 800.0}, "user_text": "a refund"}
    assert _answering_record([fragment, answer], end=12.0) is answer
    assert _answering_record([fragment], end=12.0) is fragment
    assert _answering_record([], end=12.0) is None


def test_llama_server_log_lines_give_requests_and_prompt_tokens(tmp_path):
    log = tmp_path / "llama.log"
    log.write_text("old line\n")
    meter = LlamaLogMeter(log)
    mark = meter.mark()
    with log.open("a") as f:
        f.write(
            'INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            "Llama.generate: 305 prefix-match hit, remaining 11 prompt tokens to eval\n"
            "llama_perf_context_print: prompt eval time =  524.25 ms /    11 tokens (   40.33 ms per token)\n"
            "llama_perf_context_print:        eval time = 1198.36 ms /    22 runs   (   54.47 ms per token)\n"
            "Llama.generate: 305 prefix-match hit, remaining 10 prompt tokens to eval\n"
            "disconnected\n"
            "Llama.generate: full prompt already cached, skipping reset\n"
        )
    assert meter.since(mark) == {
        "requests": 3,
        "prompt_tokens": 631,
        "prompt_tokens_computed": 21,
        "cancelled": 1,
    }
    # Another process restarting its server truncates the shared log: the window is unknown.
    log.write_text("")
    assert set(meter.since(mark).values()) == {None}


def test_each_interruption_is_put_down_to_the_utterance_said_last_before_its_decision():
    from agent.bench_barge_in import Spoken, measure
    from agent.webrtc_client import ReceivedAudio
    from processors.barge_in import BotTurn, Interruption

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

    result = measure(said, [cut, false], turns, 2, received, ended_at=30.0, requested=2)

    assert result["backchannel_false_interruptions"] == 1
    assert result["interjections"] == 2 and result["interjections_missed"] == 1
    assert result["decision_ms"]["p50"] == pytest.approx(700.0) and result["decision_ms"]["n"] == 1
    assert result["stop_ms"]["p50"] == pytest.approx(10.0)
    assert (result["stale_frames_server"], result["stale_frames_caller"], result["stale_frames"]) == (2, 1, 3)
    assert result["per_backchannel"] == [{"text": "uh huh", "interrupted_on": [""]}]


# -- the real thing ----------------------------------------------------------------------------


def _ordered(values):
    present = [v for v in values if v is not None]
    return present == sorted(present)


@pytest.mark.e2e
def test_quick_bench_writes_the_json_contract_with_sane_values(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    run = subprocess.run(
        [sys.executable, "-m", "agent", "bench", "--quick", "--turns", "2", "--json", str(out), "--plot", str(png)],
        cwd=REPO, capture_output=True, text=True, timeout=280,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "voice-to-voice" in run.stdout and "B/A" in run.stdout

    result = json.loads(out.read_text())
    assert {"stock", "brisk", "ratio", "turns", "machine", "config"} <= set(result)
    for flavor in ("stock", "brisk"):
        side = result[flavor]
        assert set(side["v2v_ms"]) >= {"p50", "p95", "mean"}
        assert set(side["stages_ms"]) == set(WAYPOINTS)
        assert side["turns"] == 2 and side["answered"] + side["unanswered"] == 2
        assert side["v2v_ms"]["p50"] > 0
        assert side["v2v_ms"]["p50"] <= side["v2v_ms"]["p95"]
    assert result["ratio"]["v2v_p50"] > 0 and result["ratio"]["v2v_p95"] > 0
    assert result["config"]["llm"] == "scripted"

    turns = result["turns"]
    assert len(turns) == 4
    # Interleaved per utterance: both sides hear utterance 0, then both hear utterance 1.
    assert [t["pair"] for t in turns] == [0, 0, 1, 1]
    assert {t["side"] for t in turns[:2]} == {t["side"] for t in turns[2:]} == {"stock", "brisk"}
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
        assert t["llm"]["requests"] >= 1 and t["llm"]["completion_tokens"] >= 1
        assert t["cpu_s"]["agent"] > 0

    barge_in = result["brisk"]["barge_in"]
    assert "barge_in" not in result["stock"]
    assert {"stop_ms", "decision_ms", "stale_frames", "backchannel_false_interruptions"} <= set(barge_in)
    for key in ("stop_ms", "decision_ms"):
        assert {"p50", "p95"} <= set(barge_in[key])
        assert barge_in[key]["n"] >= 1 and 0 <= barge_in[key]["p50"] <= barge_in[key]["p95"]
    assert barge_in["interjections"] == barge_in["interruptions_requested"] >= 3
    assert barge_in["backchannels"] >= 3
    assert barge_in["stale_frames"] == barge_in["stale_frames_server"] + barge_in["stale_frames_caller"]
    assert "Barge-in" in run.stdout and "scripted" in barge_in["llm"]

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["processor_overhead"]["processors"]

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

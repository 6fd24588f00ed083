"""The end-of-turn suite (``python -m agent bench --suite turns``): its corpus, how a policy's turn
ends are judged, and the command itself on a few utterances."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from agent.bench.conditions import parse_conditions
from agent.bench.turns import (
    NEURAL_TURNS,
    POLICIES,
    TURNS_CORPUS,
    NeuralVoice,
    TurnClip,
    channel_audio,
    judge,
    render_turn,
    summarize,
)


def test_the_corpus_has_forty_utterances_half_with_a_pause_in_several_voices_and_the_recording():
    paused = [u for u in TURNS_CORPUS if u.kind == "paused"]
    complete = [u for u in TURNS_CORPUS if u.kind == "complete"]
    assert len(TURNS_CORPUS) >= 40 and len(paused) >= 20 and len(complete) >= 20
    assert all(500 <= p <= 1200 for u in paused for p in u.pauses_ms)
    assert len({u.voice for u in TURNS_CORPUS}) >= 8 and {"arctic"} <= {u.voice for u in paused}
    assert len({u.id for u in TURNS_CORPUS}) == len(TURNS_CORPUS)


@pytest.mark.parametrize("utterance_id", ["p-list", "p-arctic"])
def test_a_paused_utterance_is_silent_in_its_pauses_and_ends_with_its_last_words(utterance_id):
    [utterance] = [u for u in TURNS_CORPUS if u.id == utterance_id]
    clip = render_turn(utterance)
    assert len(clip.pauses) == len(utterance.pauses_ms)
    for (start, end), pause_ms in zip(clip.pauses, utterance.pauses_ms):
        assert end - start == pytest.approx(pause_ms / 1000, abs=0.001)
        assert not clip.samples[round(start * 16000): round(end * 16000)].any()
        assert end < clip.speech_end_s
    # After the end of speech nothing is within 40 dB of the loudest sample (agent.audio.find_speech_end).
    after = np.abs(clip.samples[round((clip.speech_end_s + 0.02) * 16000):].astype(np.int32))
    assert after.max(initial=0) < np.abs(clip.samples.astype(np.int32)).max() / 100 * 1.5


def test_every_spoken_text_is_said_again_in_the_neural_voice():
    assert [u.text for u in NEURAL_TURNS] == [u.text for u in TURNS_CORPUS if u.voice != "arctic"]
    assert {u.voice for u in NEURAL_TURNS} == {"hibari"} and len({u.id for u in NEURAL_TURNS}) == len(NEURAL_TURNS)


def test_a_neural_voice_utterance_is_said_whole_and_cut_where_its_words_part():
    voice = NeuralVoice()
    [utterance] = [u for u in NEURAL_TURNS if u.id == "n-p-order-number"]  # "My order number is", 900, "four five ..."
    clip = render_turn(utterance, voice)
    assert clip.cut == "aligned"
    [(start, end)] = clip.pauses
    assert end - start == pytest.approx(0.9, abs=0.001) and not clip.samples[round(start * 16000): round(end * 16000)].any()

    def heard(samples):
        segments, _ = voice.whisper.transcribe(samples.astype(np.float32) / 32768, language="en")
        return " ".join(s.text for s in segments).lower()

    assert heard(clip.samples[: round(start * 16000)]).rstrip(" .?!,").endswith("number is")
    assert heard(clip.samples[round(end * 16000):]).lstrip().startswith(("four", "4"))


def test_a_neural_utterance_said_part_by_part_is_silent_for_its_pause_alone():
    # hibari pads what it says with silence: kept, the spelled name's 0.7 s pause was 1.46 s long.
    [utterance] = [u for u in NEURAL_TURNS if u.id == "n-p-spelled"]
    clip = render_turn(utterance, NeuralVoice())
    assert clip.cut == "separate"
    [(start, end)] = clip.pauses
    voiced = np.flatnonzero(clip.samples)
    last_before = voiced[voiced < round(start * 16000)].max() / 16000
    first_after = voiced[voiced >= round(end * 16000)].min() / 16000
    assert first_after - last_before == pytest.approx(0.7, abs=0.01)


def test_a_turn_end_before_the_caller_finished_is_a_cut_off_and_the_first_one_after_is_the_delay():
    clip = TurnClip(TURNS_CORPUS[0], np.zeros(16000, dtype=np.int16), speech_end_s=3.0, pauses=((1.5, 2.3),))
    assert judge(clip, [2.0, 3.45]) == {"turn_ends_ms": [-1000, 450], "cut_off": True, "eot_ms": 450}
    assert judge(clip, [3.4]) == {"turn_ends_ms": [400], "cut_off": False, "eot_ms": 400}
    assert judge(clip, []) == {"turn_ends_ms": [], "cut_off": False, "eot_ms": None}
    rows = [{"kind": "paused", **{p: judge(clip, [2.0, 3.45]) for p in POLICIES}},
            {"kind": "complete", **{p: judge(clip, [3.4]) for p in POLICIES}}]
    summary = summarize(rows)["brisk"]
    assert summary["false_cutoff_rate_paused"] == 1.0 and summary["false_cutoffs_complete"] == 0
    assert summary["eot_ms_complete"]["p50"] == 400 and summary["no_turn_end"] == 0


def test_a_phone_condition_plays_the_clip_as_a_phone_line_delivers_it_and_noise_is_added_first():
    clip = render_turn(TURNS_CORPUS[0])
    web, phone, noisy_phone = (channel_audio(clip.samples, c, seed=1) for c in parse_conditions("web,phone,phone+noisy"))
    assert web[1] == 16000 and web[0] is clip.samples
    samples, rate = phone
    assert rate == 8000 and abs(len(samples) - len(clip.samples) // 2) <= 1 and samples.dtype == np.int16
    # The same speech at the same moments: the loudest 20 ms lands where it did at 16 kHz.
    loudest = [int(np.argmax(np.abs(s[: len(s) - len(s) % (r // 50)].astype(np.int32)).reshape(-1, r // 50).max(1)))
               for s, r in (web, phone)]
    assert abs(loudest[0] - loudest[1]) <= 1
    # Noise is mixed in before the channel, so it is heard in the pauses too.
    silence = slice(0, round(0.5 * 8000))  # the lead silence

    def rms(x):
        return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))

    assert rms(noisy_phone[0][silence]) > 20 * max(rms(phone[0][silence]), 1.0)


@pytest.mark.e2e
def test_the_suite_command_writes_the_turns_json_for_every_policy_and_each_condition(tmp_path):
    out = tmp_path / "turns.json"
    proc = subprocess.run([sys.executable, "-m", "agent", "bench", "--suite", "turns", "--turns", "2",
                           "--condition", "web,phone", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=os.environ)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())["turns"]
    assert set(result["policies"]) == set(POLICIES)
    rows = result["utterances"]
    assert [(u["kind"], u["condition"]) for u in rows] == [
        ("complete", "web"), ("complete", "phone"), ("paused", "web"), ("paused", "phone")]
    for row in rows[:2]:
        for policy in POLICIES:
            assert row[policy]["eot_ms"] is not None and row[policy]["eot_ms"] > 0 and not row[policy]["cut_off"], (row["condition"], policy)
    # The first paused utterance ("My order number is", 0.9 s, ...): the fixed timeout cuts it on either line.
    assert rows[2]["brisk_fixed"]["cut_off"] and rows[3]["brisk_fixed"]["cut_off"]
    # The top-level summaries are the first condition's; each condition has its own.
    assert set(result["conditions"]) == {"web", "phone"}
    assert result["conditions"]["web"]["policies"] == result["policies"]
    assert result["conditions"]["phone"]["policies"]["brisk_fixed"]["false_cutoffs_paused"] == 1
    assert "End of turn" in proc.stdout and "(phone)" in proc.stdout

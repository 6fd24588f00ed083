"""The FAQ suite per condition: which channels and noises a run names, the noise it mixes in, and
one question asked over a real WebRTC call and a real Twilio media stream with noise.

The measurements themselves (WER, right answers, v2v per condition) are ``python -m agent bench
--suite faq --condition ...``: minutes of real calls per business, a benchmark rather than a test.
"""

from contextlib import AsyncExitStack

import numpy as np
import pytest
import pytest_asyncio

from agent.bench.ab import parse_args
from agent.bench.calls import start_rig
from agent.bench.conditions import Condition, measure_conditions, parse_conditions, pink_noise, with_noise
from agent.bench.corpus import render
from agent.bench.faq import grade
from agent.bench.faq_questions import QUESTIONS
from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime



def test_a_run_names_its_conditions_as_channels_and_noises():
    conditions = parse_conditions("web,phone,noisy,phone+noisy,noisy10")
    assert [(c.name, c.channel, c.snr_db) for c in conditions] == [
        ("web", "web", None), ("phone", "phone", None), ("noisy", "web", 20.0), ("phone+noisy", "phone", 20.0),
        ("noisy10", "web", 10.0)]
    with pytest.raises(ValueError, match="'radio'"):
        parse_conditions("web,radio")
    with pytest.raises(ValueError, match="twice"):
        parse_conditions("phone,phone")


def test_the_bench_takes_conditions_for_the_faq_and_turns_suites_only():
    args = parse_args(["--suite", "faq", "--condition", "web,phone+noisy"])
    assert [c.name for c in args.condition] == ["web", "phone+noisy"]
    assert [c.channel for c in parse_args(["--suite", "turns", "--condition", "phone"]).condition] == ["phone"]
    for wrong in (["--condition", "web"], ["--suite", "faq", "--text", "--condition", "web"],
                  ["--suite", "faq", "--condition", "web,loud"], ["--suite", "phone", "--condition", "web"]):
        with pytest.raises(SystemExit):
            parse_args(wrong)


def octave_powers(x: np.ndarray, rate: int = 16000) -> list[float]:
    power = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / rate)
    return [float(power[(freqs >= f) & (freqs < 2 * f)].sum()) for f in (125, 250, 500, 1000, 2000, 4000)]


def test_pink_noise_has_as_much_power_in_each_octave():
    octaves = octave_powers(pink_noise(16000 * 4, seed=1))
    # White noise would hold 32 times more in the top octave than in the bottom one.
    assert max(octaves) / min(octaves) < 1.5


def test_noise_is_mixed_in_at_the_snr_asked_over_the_speech_and_leaves_its_timing():
    clip = render(QUESTIONS[0].utterance)
    for snr in (20.0, 10.0):
        noisy = with_noise(clip, snr, seed=3)
        # The speech's power over its own samples (not the silences around it) against the noise's.
        speech = clip.samples[clip.samples != 0].astype(float)
        noise = noisy.samples.astype(float) - clip.samples
        measured = 10 * np.log10(np.mean(speech ** 2) / np.mean(noise ** 2))
        assert measured == pytest.approx(snr, abs=0.2)
        assert len(noisy.samples) == len(clip.samples) and noisy.speech_end_s == clip.speech_end_s
    assert np.array_equal(with_noise(clip, 20.0, seed=3).samples, with_noise(clip, 20.0, seed=3).samples)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime():
    llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0)
    async with serve_app(llm.app()) as llm_url:
        config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted")
        runtime = Runtime(config)
        await runtime.start()
        try:
            yield runtime, llm
        finally:
            await runtime.stop()


@pytest.mark.asyncio(loop_scope="module")
async def test_one_question_is_asked_over_webrtc_and_over_a_noisy_twilio_stream(runtime):
    runtime, llm = runtime
    question = next(q for q in QUESTIONS if q.id == "faq-saturday-open")
    business = runtime.config.business_definition
    async with AsyncExitStack() as stack:
        rig = await start_rig(stack, runtime.config, runtime, llm, ("brisk",))
        phone_calls = []
        rig.sides["brisk"].app.state.phone.listeners.append(lambda stream_sid, call: phone_calls.append(stream_sid))
        result = await measure_conditions(
            [Condition("web", "web"), Condition("phone+noisy", "phone", 20.0)], [question],
            [render(question.utterance)], rig, grade=lambda q, answer: grade(q, answer, business=business),
            log=lambda line: None)
        # Each call had ended, its line free, before the next was placed.
        assert rig.sides["brisk"].app.state.admission.active == 0

    assert list(result) == ["web", "phone+noisy"]
    assert len(phone_calls) == 1  # the phone condition's call came in over the Twilio routes
    for name, condition in result.items():
        [turn] = condition["turns"]
        assert turn["answered"] and "saturday" in turn["user_text"].lower(), (name, turn)
        assert turn["v2v_ms"] > 0 and 0.0 <= condition["wer"] <= 1.0
        assert condition["calls"] == 1 and sum(condition[o] for o in ("correct", "wrong", "dont_know",
                                                                      "incomplete", "no_answer")) == 1

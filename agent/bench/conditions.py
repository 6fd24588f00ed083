"""``agent bench --suite faq --condition ...``: how well Brisk hears and answers through each channel.

    python -m agent bench --suite faq --condition web,phone,noisy,phone+noisy [--business FILE ...] [--turns N]

A condition is a channel, with noise or without (``parse_conditions``):

- ``web``: the clip as a browser sends it, 16 kHz PCM over a real WebRTC call (aiortc).
- ``phone``: 8 kHz G.711 mu-law over the Twilio Media Streams path, a real WebSocket to the
  server's ``/ws/twilio`` after its voice webhook (agent/caller/twilio_caller.py), in real time.
- ``+noisy`` / ``+noisy10``: pink noise mixed into the 16 kHz clip at 20 dB / 10 dB SNR (speech
  power over the speech, ``with_noise``) before the channel, as a caller's room is.

Each question of the business's FAQ file is one Brisk call per condition, the conditions taking
turns question by question so load drifts hit them all; graded as the FAQ suite grades
(agent/bench/faq.py). Per condition (JSON ``"conditions"``): ``wer`` (mean word error rate of what
the pipeline heard against what was said), right / wrong / don't know / incomplete / no answer,
and ``v2v_p50_ms`` (P50 over the right answers, and over all answers). Brisk only: the stock
comparison is the FAQ suite's own calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

import numpy as np

from agent.bench.calls import Side, answer_went_out, answering_record, bench_call, heard_answer, heard_text
from agent.bench.corpus import Clip
from agent.bench.faq_questions import OUTCOMES
from agent.bench.listening import first_audible_answer
from agent.bench.phone import phone_line
from agent.bench.stats import fmt, percentiles, word_error_rate
from agent.caller import twilio_caller

CHANNELS = ("web", "phone")
NOISES = {"noisy": 20.0, "noisy10": 10.0}  # name -> SNR in dB


@dataclasses.dataclass(frozen=True)
class Condition:
    """A channel (``web`` or ``phone``) and the SNR of the noise mixed in (None: clean)."""

    name: str
    channel: str
    snr_db: float | None = None


def parse_conditions(text: str) -> list[Condition]:
    """``"web,phone,noisy,phone+noisy"`` -> conditions; ``noisy`` alone is the web channel with noise.

    Raises ValueError naming the part it cannot read."""
    conditions = []
    for name in (part.strip() for part in text.split(",")):
        channel, snr = "web", None
        for piece in name.split("+"):
            if piece in CHANNELS:
                channel = piece
            elif piece in NOISES:
                snr = NOISES[piece]
            else:
                raise ValueError(f"unknown condition part {piece!r} in {name!r}: a channel "
                                 f"({', '.join(CHANNELS)}) and/or a noise ({', '.join(NOISES)}), joined by '+'")
        if name in {c.name for c in conditions}:
            raise ValueError(f"condition {name!r} is named twice")
        conditions.append(Condition(name, channel, snr))
    return conditions


def pink_noise(n: int, seed: int) -> np.ndarray:
    """``n`` samples of pink (1/f power) noise, unit RMS: white noise shaped in the frequency domain."""
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum[1:] /= np.sqrt(np.arange(1, len(spectrum)))
    spectrum[0] = 0.0
    noise = np.fft.irfft(spectrum, n)
    return noise / (np.sqrt(np.mean(noise ** 2)) or 1.0)


def with_noise(clip: Clip, snr_db: float, seed: int) -> Clip:
    """``clip`` with pink noise at ``snr_db`` below the speech's power (``noisy``)."""
    return dataclasses.replace(clip, samples=noisy(clip.samples, snr_db, seed))


def noisy(samples: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """int16 ``samples`` with pink noise at ``snr_db`` below the speech's power (measured over the
    speech, not its silences), from the first sample to the last; the speech's timing is unchanged."""
    samples = samples.astype(np.float64)
    speech = samples[np.abs(samples) > 0]
    power = float(np.mean(speech ** 2)) if speech.size else 0.0
    noise = pink_noise(len(samples), seed) * np.sqrt(power / 10 ** (snr_db / 10))
    return np.clip(samples + noise, -32768, 32767).astype(np.int16)


async def phone_call(side: Side, clip: Clip, before_call=None) -> dict:
    """Speak ``clip`` into one new phone call to ``side`` over its Twilio routes; the turn's
    measurements, as ``agent.bench.calls.bench_call`` gives them for a WebRTC call."""
    if before_call is not None:
        await before_call()
    phone = side.app.state.phone
    caller = await twilio_caller.dial(side.base_url, f"CA{uuid.uuid4().hex}")
    try:
        samples = phone_line(clip.samples)
        said = asyncio.create_task(caller.say(samples))
        deadline = time.monotonic() + 30
        while caller.stream_sid not in phone.calls or phone.calls[caller.stream_sid].call is None:
            # The call's pipeline is built as the stream starts; what it records is read below.
            if time.monotonic() > deadline:
                raise RuntimeError(f"the phone call {caller.call_sid} got no pipeline in 30 s")
            await asyncio.sleep(0.02)
        call = phone.calls[caller.stream_sid].call
        records_before = len(call.latency.turns)
        utterance = await asyncio.wait_for(said, timeout=clip.duration_s + 30)
        end = utterance.time_of_sample(round(clip.speech_end_s * twilio_caller.SAMPLE_RATE))

        first, cut = await first_audible_answer(caller, end, lambda *_: answer_went_out(call, records_before))
    finally:
        await caller.hang_up()
        # The call's pipeline closes its last turn record and frees its line as it ends: wait for it.
        deadline = time.monotonic() + 15
        while caller.stream_sid in phone.calls and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    records = call.latency.summary()["turns"]
    record = answering_record(records, end)
    first = heard_answer(caller.received, first, record)
    user_text = heard_text(records, record)
    answered = first is not None and any(r.get("bot_text") for r in records)
    return {
        "utterance": clip.utterance.id,
        "text": clip.utterance.text,
        "side": side.flavor,
        "answered": answered,
        "cut": cut,
        "v2v_ms": None if first is None else round((first - end) * 1000, 1),
        "user_text": user_text,
        "wer": round(word_error_rate(clip.utterance.text, user_text), 3),
        "bot_text": (record or {}).get("bot_text", ""),
        "fast_path": (record or {}).get("fast_path"),
    }


async def call_in(condition: Condition, side: Side, clip: Clip, seed: int, rig) -> dict:
    """One call of ``clip`` to Brisk's ``side`` in ``condition``."""
    if condition.snr_db is not None:
        clip = with_noise(clip, condition.snr_db, seed)
    if condition.channel == "phone":
        return await phone_call(side, clip, rig.reset_llm_cache)
    return await bench_call(side, clip, rig.meter, rig.llm_pid, rig.scripted_llm, rig.reset_llm_cache)


def summarize(turns: list[dict]) -> dict:
    """Per condition: WER, the grades, and v2v P50 over right answers and over all."""
    right = [t["v2v_ms"] for t in turns if t["grade"] == "correct" and t["v2v_ms"] is not None]
    every = [t["v2v_ms"] for t in turns if t["v2v_ms"] is not None]
    return {
        "calls": len(turns),
        "wer": round(float(np.mean([t["wer"] for t in turns])), 3) if turns else None,
        **{outcome: sum(1 for t in turns if t["grade"] == outcome) for outcome in OUTCOMES},
        "v2v_p50_ms": {"right": percentiles(right)["p50"], "all": percentiles(every)["p50"]},
    }


async def measure_conditions(conditions: list[Condition], questions, clips: list[Clip], rig, grade, log) -> dict:
    """Every question in every condition, Brisk's side of ``rig``; ``grade(question, text)``."""
    side = rig.sides["brisk"]
    turns: dict[str, list[dict]] = {c.name: [] for c in conditions}
    for i, (question, clip) in enumerate(zip(questions, clips)):
        # Rotated per question, so no condition always comes first after another's call.
        for condition in conditions[i % len(conditions):] + conditions[:i % len(conditions)]:
            started = time.monotonic()
            turn = await call_in(condition, side, clip, seed=i, rig=rig)
            turn["condition"] = condition.name
            turn["grade"] = grade(question, turn["bot_text"] if turn["answered"] else None)
            turns[condition.name].append(turn)
            log(f"[{condition.name:12}] {question.id:24} {turn['grade']:10} wer {turn['wer']:.2f} "
                f"v2v {fmt(turn['v2v_ms']):>5} ms ({time.monotonic() - started:.0f} s) "
                f"heard {turn['user_text']!r} -> {turn['bot_text']!r}")
    return {c.name: {"channel": c.channel, "snr_db": c.snr_db, **summarize(turns[c.name]), "turns": turns[c.name]}
            for c in conditions}


def format_conditions(conditions: dict) -> str:
    lines = ["| condition | WER | right | wrong | don't know | incomplete / none | v2v P50, right (ms) | v2v P50, all (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, c in conditions.items():
        lines.append(f"| {name} | {c['wer']:.1%} | {c['correct']} | {c['wrong']} | {c['dont_know']} | "
                     f"{c['incomplete'] + c['no_answer']} | {fmt(c['v2v_p50_ms']['right'])} | "
                     f"{fmt(c['v2v_p50_ms']['all'])} |")
    return "\n".join(lines)


"""``agent bench``'s barge-in section: one real call to the Brisk pipeline in which the caller keeps
talking over the bot.

The caller asks a question; each time the bot has been heard for a second of its (long, scripted)
answer, the caller says a short espeak interjection ("wait, stop", "hold on", ...), which must
interrupt it; before some of the interjections it first says a backchannel ("uh huh", "yeah",
"mm hmm"), which must not. The call always uses a scripted LLM with a long, fixed answer, even
when the A/B turns use the embedded model: the bot must still be talking when the caller cuts in,
and every cut must be of the same kind of answer. It shares the benchmark's Whisper and voice;
only the LLM client differs.

Measured, per interjection: ``decision_ms`` from the interjection's true speech start (its first
sample as played by the caller's microphone, on the caller's clock) to the server's decision, and
``stop_ms`` from the decision to the cut turn's last audio leaving the output transport
(``processors.barge_in.barge_in.Interruption.stop_ms``), and ``stop_at_caller_ms`` from the decision to the
last audible bot audio the caller received before the next answer (0 when none came after the
decision): where the caller hears the bot stop. Per call: stale frames, i.e. frames of a cut turn
that left the server after the interruption (``BargeIn.stale_frames``) plus audible audio that
reached the caller after the cut turn's last frame had gone out (with a transit allowance) and
before the next answer's first frame went out; backchannel false interruptions, i.e.
interruptions whose decision fell while a backchannel was the caller's latest utterance; and
``stale_speech_ended``, how often the output transport said the bot started again on the chunk
it was writing when a cut came, and the stale-turn gate ended that (``BargeIn.stale_speech_ended``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from agent.bench.corpus import Utterance, render
from agent.bench.listening import POLL_S, heard_for
from agent.bench.scripted_llm import ScriptedLLM
from agent.bench.stats import fmt, percentiles
from agent.caller.aiortc_caller import AUDIBLE_RMS, ReceivedAudio, WavMicrophone, WebRTCCaller
from agent.caller.call import running_server
from agent.caller.loopback import serve_app
from processors.llm.openai_llm import make_openai_client

FULL_INTERRUPTIONS = 10
QUICK_INTERRUPTIONS = 3
BACKCHANNELS = 3
# The caller cuts in once it has heard this much of an answer.
HEAR_BEFORE_CUT_S = 1.0
# After a backchannel: time for its final transcript, so the pipeline has classified it before
# the next utterance starts.
BACKCHANNEL_SETTLE_S = 1.0
# Loopback WebRTC (RTP, jitter buffer, decode) from the server's last frame out to the caller:
# audible audio later than this, before the next answer, is stale audio of the cut turn.
CALLER_TRANSIT_S = 0.25

BARGE_IN_METHOD = (
    "brisk only, one extra call after the A/B turns, always with a scripted LLM whose answer is long "
    "(agent/bench/barge_in.py), whatever --llm is; the caller cuts in after "
    f"{HEAR_BEFORE_CUT_S:g} s of each answer, {BACKCHANNELS} of the cuts preceded by a backchannel; "
    "decision_ms: the interjection's first voiced sample as played -> the server's decision; stop_ms: the "
    "decision -> the cut turn's last audio out of the server; stop_at_caller_ms: the decision -> the last "
    "audible bot audio received by the caller before the next answer (0: none after the decision); stale_frames: the server's count + audible "
    f"audio at the caller more than {CALLER_TRANSIT_S * 1000:.0f} ms after the cut turn's last frame went out "
    "and before the next answer's first; backchannel_false_interruptions: interruptions decided while a "
    "backchannel was the caller's latest utterance"
)

LONG_ANSWER = (
    "Our premium plan includes unlimited calls, priority support and a dedicated account manager. "
    "It costs forty dollars a month, or four hundred dollars a year if you pay up front. "
    "You can switch plans at any time from the billing page, and the change takes effect at once. "
    "If you cancel within thirty days, we refund the whole amount, no questions asked. "
    "Business customers can also add extra seats for ten dollars a month each. "
    "Every plan comes with our mobile app, which works on both phones and tablets."
)

QUESTION = Utterance("bi-question", "Tell me about your premium plan.", "short", "en-us", 165,
                     ("Tell me about your premium plan.",))
INTERJECTIONS = tuple(
    Utterance(f"bi-cut-{i}", text, "short", voice, wpm, (text,))
    for i, (text, voice, wpm) in enumerate((
        ("Wait, stop.", "en-us", 170),
        ("Hold on a second.", "en-gb", 160),
        ("Actually, one more thing.", "en-us+f2", 165),
        ("Sorry, can I ask something?", "en-gb-x-rp", 170),
        ("No, that's not what I meant.", "en-us+m3", 175),
        ("Excuse me, quick question.", "en-029", 160),
        ("Stop, please.", "en-us+f5", 150),
        ("Hang on, how much is that?", "en-gb-scotland", 165),
        ("Wait, what about refunds?", "en-us", 180),
        ("Let me stop you there.", "en-gb", 170),
    ))
)  # fmt: skip
# Renderings tiny.en writes as backchannels; an espeak "mm hmm" it hears as "And then...", which
# would measure the clip, not the barge-in policy.
BACKCHANNEL_CLIPS = (
    Utterance("bi-bc-uh-huh", "uh huh", "backchannel", "en-gb", 120, ("uh huh",)),
    Utterance("bi-bc-yeah", "yeah", "backchannel", "en-us", 140, ("yeah",)),
    Utterance("bi-bc-okay", "okay", "backchannel", "en-us", 140, ("okay",)),
)


class InterjectingMicrophone(WavMicrophone):
    """A ``WavMicrophone`` whose WAV grows: ``say`` appends a clip at the next frame to be played.

    The whole call is still one WAV on one clock, so ``time_of_sample`` gives when any sample of
    any clip was played.
    """

    def __init__(self, sample_rate: int):
        super().__init__(np.zeros(0, dtype=np.int16), sample_rate)

    def say(self, samples: np.ndarray) -> int:
        """Queue ``samples`` after whatever is still playing; returns the index of its first sample."""
        at = max(len(self.samples), self._index)
        gap = np.zeros(at - len(self.samples), dtype=np.int16)
        self.samples = np.concatenate([self.samples, gap, samples.astype(np.int16)])
        self.finished.clear()
        return at

    async def played(self, index: int) -> None:
        """Returns once sample ``index`` has been played."""
        while self.start_time is None or time.monotonic() < self.time_of_sample(index):
            await asyncio.sleep(POLL_S)


@dataclass(frozen=True)
class Spoken:
    """One utterance the caller said, on the caller's clock (``time.monotonic()``)."""

    kind: str  # "question", "interjection" or "backchannel"
    text: str
    start: float  # first voiced sample played
    end: float  # last voiced sample played


async def _say(mic: InterjectingMicrophone, utterance: Utterance) -> Spoken:
    clip = render(utterance)
    voiced = np.flatnonzero(clip.samples)
    # The corpus' lead silence is for a cold VAD; the open mic is already sending silence.
    samples = clip.samples[voiced[0] : voiced[-1] + 1]
    at = mic.say(samples)
    end_index = at + len(samples)
    await mic.played(end_index)
    return Spoken(
        utterance.kind if utterance.kind == "backchannel" else "interjection",
        utterance.text,
        mic.time_of_sample(at),
        mic.time_of_sample(end_index),
    )


def measure(spoken: list[Spoken], interruptions: list, turns: list, server_stale_frames: int,
            received: list[ReceivedAudio], ended_at: float, requested: int, stale_speech_ended: int = 0) -> dict:
    """The ``barge_in`` JSON object from what the caller said and what the server's ``BargeIn`` saw.

    Each interruption is put down to the caller's latest utterance begun before its decision.
    """
    said = sorted((s for s in spoken if s.kind != "question"), key=lambda s: s.start)
    cause: dict[int, list] = {}
    for cut in interruptions:
        before = [i for i, s in enumerate(said) if s.start <= cut.decided_at]
        if before:
            cause.setdefault(before[-1], []).append(cut)
    def next_answer_after(cut) -> float:
        nexts = [t.first_audio_out_at for t in turns if t.turn_id > cut.turn_id and t.first_audio_out_at]
        return min(nexts) if nexts else ended_at

    def stop_at_caller_ms(cut) -> float:
        until = next_answer_after(cut)
        heard = [c.t for c in received if cut.decided_at <= c.t < until and c.rms >= AUDIBLE_RMS]
        return round((max(heard) - cut.decided_at) * 1000, 1) if heard else 0.0

    interjections = []
    for i, s in enumerate(said):
        if s.kind != "interjection":
            continue
        cut = (cause.get(i) or [None])[0]
        interjections.append({
            "text": s.text,
            "interrupted": cut is not None,
            "decision_ms": None if cut is None else round((cut.decided_at - s.start) * 1000, 1),
            "stop_ms": None if cut is None or cut.stop_ms is None else round(cut.stop_ms, 1),
            "stop_at_caller_ms": None if cut is None else stop_at_caller_ms(cut),
            "phase": None if cut is None else cut.phase,
            "decided_on": None if cut is None else cut.text,
        })
    backchannels = [
        {"text": s.text, "interrupted_on": [cut.text for cut in cause.get(i, [])]}
        for i, s in enumerate(said) if s.kind == "backchannel"
    ]
    false = sum(len(b["interrupted_on"]) for b in backchannels)

    caller_stale = 0
    for cut in interruptions:
        went_silent = (cut.last_audio_out_at or cut.decided_at) + CALLER_TRANSIT_S
        until = next_answer_after(cut)
        caller_stale += sum(1 for c in received if went_silent < c.t < until and c.rms >= AUDIBLE_RMS)

    def stats(key):
        s = percentiles([j[key] for j in interjections])
        return {"p50": s["p50"], "p95": s["p95"], "n": s["n"]}

    return {
        "stop_ms": stats("stop_ms"),
        "stop_at_caller_ms": stats("stop_at_caller_ms"),
        "decision_ms": stats("decision_ms"),
        "stale_frames": server_stale_frames + caller_stale,
        "stale_frames_server": server_stale_frames,
        "stale_frames_caller": caller_stale,
        "stale_speech_ended": stale_speech_ended,
        "backchannel_false_interruptions": false,
        "interruptions_requested": requested,
        "interjections": len(interjections),
        "interjections_missed": sum(not j["interrupted"] for j in interjections),
        "backchannels": len(backchannels),
        "per_interjection": interjections,
        "per_backchannel": backchannels,
    }


async def run_barge_in(config, runtime, *, interruptions: int, backchannels: int = BACKCHANNELS,
                       ttft_s: float = 0.3, tokens_per_s: float = 30.0, log=None) -> dict:
    """Place the barge-in call against a Brisk server sharing ``runtime``'s models; returns ``measure``'s dict."""
    llm = ScriptedLLM(ttft_s=ttft_s, tokens_per_s=tokens_per_s, answer_for=lambda _messages: LONG_ANSWER)
    async with serve_app(llm.app()) as llm_url:
        client = make_openai_client(base_url=f"{llm_url}/v1", api_key=None,
                                    connect_timeout=config.llm_connect_timeout_secs,
                                    total_timeout=config.llm_timeout_secs)
        # The same loaded Whisper and voice; only the LLM the calls talk to differs.
        shared = copy.copy(runtime)
        # Every answer is the LLM's long one, to be cut: no question is the fast path's.
        resources = runtime.resources
        shared.resources = dataclasses.replace(
            resources, llm_client=client, llm_model="scripted",
            config=resources.config.model_copy(update={"fast_path": False}),
        )
        try:
            async with running_server(config, shared) as (base_url, app):
                result = await _call(base_url, app, interruptions, backchannels, log)
        finally:
            await client.close()
    result["llm"] = (f"scripted, always (a {len(LONG_ANSWER.split())}-word answer, TTFT {ttft_s * 1000:.0f} ms, "
                     f"{tokens_per_s:g} tok/s)")
    return result


async def _call(base_url: str, app, interruptions: int, backchannels: int, log) -> dict:
    question = render(QUESTION)
    mic = InterjectingMicrophone(question.sample_rate)
    caller = WebRTCCaller(base_url)
    await caller.connect(mic)
    pc_id = caller.pc_id
    call, task = app.state.calls.calls.get(pc_id), app.state.calls.tasks.get(pc_id)
    spoken: list[Spoken] = []
    try:
        said = await _say(mic, QUESTION)
        spoken.append(dataclasses.replace(said, kind="question"))
        mark = said.end
        for i in range(interruptions):
            if not await heard_for(caller, mark, HEAR_BEFORE_CUT_S):
                break  # the bot stopped answering: what was measured so far stands
            if i < backchannels:
                said = await _say(mic, BACKCHANNEL_CLIPS[i % len(BACKCHANNEL_CLIPS)])
                spoken.append(said)
                await asyncio.sleep(BACKCHANNEL_SETTLE_S)
                if not await heard_for(caller, said.end, 0.2):
                    break
            said = await _say(mic, INTERJECTIONS[i % len(INTERJECTIONS)])
            spoken.append(said)
            mark = said.end
            if log:
                log(f"barge-in: [{i + 1}/{interruptions}] said {said.text!r}")
        # Hear the start of the answer to the last interjection: it closes the window in which
        # audio of the last cut turn would be stale.
        await heard_for(caller, mark, 0.3)
    finally:
        ended_at = time.monotonic()
        await caller.close()
        if task is not None:
            await asyncio.wait([task], timeout=10)
    barge_in = call.barge_in
    return measure(spoken, list(barge_in.interruptions), barge_in.turns, barge_in.stale_frames,
                   list(caller.received), ended_at, interruptions, stale_speech_ended=barge_in.stale_speech_ended)


def format_barge_in(result: dict) -> str:
    stop, decision = result["stop_ms"], result["decision_ms"]
    heard = result.get("stop_at_caller_ms") or {"p50": None, "p95": None, "n": 0}
    return "\n".join([
        f"Barge-in (brisk, one call, LLM {result.get('llm', 'scripted')}): "
        f"{result['interjections'] - result['interjections_missed']}/{result['interjections']} interjections "
        f"interrupted, {result['backchannels']} backchannels",
        f"{'':<44}{'P50':>7}{'P95':>7}{'n':>4}",
        f"{'stop: decision -> last bot audio out (ms)':<44}{fmt(stop['p50']):>7}{fmt(stop['p95']):>7}{stop['n']:>4}",
        f"{'stop heard: decision -> last audio at caller':<44}{fmt(heard['p50']):>7}{fmt(heard['p95']):>7}"
        f"{heard['n']:>4}",
        f"{'decision: true speech start -> decision (ms)':<44}{fmt(decision['p50']):>7}"
        f"{fmt(decision['p95']):>7}{decision['n']:>4}",
        f"stale frames {result['stale_frames']} (server {result['stale_frames_server']}, caller "
        f"{result['stale_frames_caller']}), backchannel false interruptions "
        f"{result['backchannel_false_interruptions']}, a cut chunk's restarted speech ended "
        f"{result.get('stale_speech_ended', 0)}",
    ])  # fmt: skip

"""Barge-in end to end over real WebRTC: an aiortc caller talks over a real Brisk server.

Real Silero VAD, streaming tiny.en, the hibari voice and the SmallWebRTC transport; the LLM is
the scripted OpenAI-compatible server (real HTTP + SSE) so the answers are long and known.
The caller's microphone (tests/fakes/scripted_microphone.py) asks, waits until the bot is
mid-answer, then talks over it, keeping the send time of every frame.
"""

import asyncio
import json
import time
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import pytest_asyncio

from agent.caller.call import running_server
from agent.config import load_config
from agent.caller.loopback import serve_app
from agent.runtime.runtime import Runtime
from agent.bench.scripted_llm import ScriptedLLM
from agent.caller.aiortc_caller import AUDIBLE_RMS, WebRTCCaller
from processors.barge_in.barge_in import BargeIn
from tests.fakes.scripted_microphone import ScriptedMicrophone
from tests.speech import synthesize_speech
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

LONG_ANSWER = (
    "We rent city bikes, mountain bikes and electric bikes by the hour or by the day. "
    "City bikes are the lightest, with three gears and a basket on the front. "
    "Mountain bikes have front suspension and wide tyres for the forest trails north of town. "
    "Electric bikes carry you up the steepest hills and their batteries last about sixty miles. "
    "Every rental comes with a helmet, a lock and a map of the best routes around the lake. "
    "Children's bikes and trailers are available too, and we fit child seats for free."
)
SHORT_ANSWER = "We are open from nine to six, every day of the week. Helmets are free with every rental."
CHEAPER_ANSWER = "Yes, the city bike is the cheapest."


def answers(served: "Served", since: float) -> list:
    """The streamed completions (answers and drafts, not prefix warm-ups) requested since ``since``."""
    return [r for r in served.llm.requests if r.received_at >= since and (r.tokens_sent or r.disconnected)]


def answer_for(messages: list[dict]) -> str:
    question = str(messages[-1].get("content", "")).lower()
    if "cheaper" in question:
        return CHEAPER_ANSWER
    if "hours" in question:
        return SHORT_ANSWER
    return LONG_ANSWER


class Served:
    def __init__(self, base_url: str, app, llm: ScriptedLLM, barge_ins: list[BargeIn]):
        self.base_url, self.app, self.llm, self.barge_ins = base_url, app, llm, barge_ins
        self.caller: WebRTCCaller | None = None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served():
    llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0, answer_for=answer_for)
    barge_ins: list[BargeIn] = []
    async with serve_app(llm.app()) as llm_url:
        config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", fast_path=False)  # LLM answers to cut
        runtime = Runtime(config)
        await runtime.start()
        try:
            async with running_server(config, runtime) as (base_url, app):
                app.state.calls.listeners.append(lambda _pc_id, call: barge_ins.append(call.barge_in))
                yield Served(base_url, app, llm, barge_ins)
        finally:
            await runtime.stop()


async def dial(served: Served, mic: ScriptedMicrophone) -> BargeIn:
    """Call the server with ``mic``; the new call's barge-in state once its pipeline is built."""
    calls_before = len(served.barge_ins)
    served.caller = WebRTCCaller(served.base_url)
    await served.caller.connect(mic)
    await until(lambda: len(served.barge_ins) > calls_before, "the call's pipeline", timeout=10)
    return served.barge_ins[-1]


def audible(caller: WebRTCCaller, after: float = 0.0, before: float = float("inf")) -> list[float]:
    """Arrival times of the audible bot audio chunks between two monotonic times."""
    return [c.t for c in caller.received if after < c.t < before and c.rms >= AUDIBLE_RMS]


async def test_talking_over_a_long_answer_stops_the_bot_at_once_and_none_of_it_comes_after(
    served, artifacts_dir
):
    question = synthesize_speech("Tell me about your bikes.", tail_silence=0.0)
    # Long enough that the bot must fall silent while the caller is still talking.
    interruption = synthesize_speech(
        "Wait, sorry to cut in, do you have anything cheaper for a family of four?", tail_silence=0.5
    )
    mic = ScriptedMicrophone(question.sample_rate)
    barge_in = await dial(served, mic)
    caller = served.caller
    dialled_at = time.monotonic()
    # Slow enough that the answer is still streaming when the user talks over it.
    served.llm.tokens_per_s = 8.0
    try:
        mic.say(question.samples)
        await until(lambda: len(audible(caller)) * 0.02 >= 2.0, "two seconds of the answer", timeout=30)
        said = mic.say(interruption.samples)
        await said.done.wait()
        await until(lambda: len(barge_in.turns) == 2 and barge_in.turns[1].finished, "next answer", timeout=30)
        await asyncio.sleep(0.5)
    finally:
        served.llm.tokens_per_s = 30.0
        await caller.close()

    [cut] = barge_in.interruptions
    first_speech_sent = said.time_of_sample(round(interruption.speech_start_s * interruption.sample_rate))
    speech_end_sent = said.time_of_sample(round(interruption.speech_end_s * interruption.sample_rate))
    old, new = barge_in.turns
    assert cut.turn_id == old.turn_id and cut.phase == "playback"
    assert first_speech_sent < cut.decided_at < speech_end_sent

    # The server: the LLM stream was closed, no frame of the cut answer went out after the
    # interruption reached the transport, and the next answer knows only what was played.
    streaming = [r for r in answers(served, dialled_at) if r.received_at < cut.decided_at]
    next_answered = [r for r in answers(served, cut.decided_at) if "cheaper" in r.last_user_text.lower()][-1]
    assert streaming[-1].disconnected and not streaming[-1].completed
    assert cut.stale_frames == 0 and barge_in.stale_frames == 0
    assert cut.spoken_text and LONG_ANSWER.startswith(cut.spoken_text) and cut.spoken_text != LONG_ANSWER
    assistant = [m["content"] for m in next_answered.messages if m["role"] == "assistant"]
    assert assistant == [cut.spoken_text]

    # The caller: the bot fell silent while the user was still talking, and nothing of the cut
    # answer arrived after that: the next audible audio is the next answer's.
    old_audio = audible(caller, before=new.first_audio_out_at)
    assert old_audio and old_audio[-1] < speech_end_sent
    assert audible(caller, after=old_audio[-1], before=new.first_audio_out_at) == []
    assert audible(caller, after=new.first_audio_out_at)
    measured = {
        "first_speech_frame_sent_to_decision_ms": (cut.decided_at - first_speech_sent) * 1000,
        "decision_to_interruption_at_transport_ms": (cut.reached_output_at - cut.decided_at) * 1000,
        "decision_to_last_bot_audio_out_ms": cut.stop_ms,
        "first_speech_frame_sent_to_last_bot_audio_at_caller_ms": (old_audio[-1] - first_speech_sent) * 1000,
        "decision_to_last_bot_audio_at_caller_ms": (old_audio[-1] - cut.decided_at) * 1000,
        "spoken_text": cut.spoken_text,
    }
    (artifacts_dir / "barge_in_e2e.json").write_text(json.dumps(measured, indent=2) + "\n")
    print(f"\nbarge-in over WebRTC: {measured}")

    # The call's record keeps the cut answer as the caller heard it, not as it was written.
    record = await closed_record(served, caller.call_id)
    cut_turns = [t for t in record["turns"] if t["interrupted"] and t["bot_text"]]
    assert [t["bot_text"] for t in cut_turns] == [cut.spoken_text]
    assert any("cheaper" in t["user_text"].lower() and not t["interrupted"] for t in record["turns"])


async def closed_record(served: Served, call_id: str) -> dict:
    """The call's record (GET /api/calls/{id}, from this machine) once the call is closed."""
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        deadline = time.monotonic() + 15
        while True:
            record = (await http.get(f"/api/calls/{quote(call_id, safe='')}")).json()
            if record.get("status") not in (None, "in_progress") or time.monotonic() > deadline:
                return record
            await asyncio.sleep(0.1)


async def test_a_backchannel_over_the_answer_lets_the_bot_finish_and_is_reported_as_one(served):
    question = synthesize_speech("What are your hours?", tail_silence=0.0)
    # tiny.en writes this espeak "uh huh" as "Uh-huh" (and its partials start with "Uh").
    backchannel = synthesize_speech("uh huh", voice="en-gb", words_per_minute=120, tail_silence=0.5)
    mic = ScriptedMicrophone(question.sample_rate)
    barge_in = await dial(served, mic)
    caller = served.caller
    dialled_at = time.monotonic()
    try:
        mic.say(question.samples)
        await until(lambda: len(audible(caller)) * 0.02 >= 1.0, "a second of the answer", timeout=30)
        said = mic.say(backchannel.samples)
        await said.done.wait()
        await until(lambda: barge_in.turns and barge_in.turns[0].finished, "the answer to end", timeout=30)
        await asyncio.sleep(1.0)
        call = served.app.state.calls.calls[caller.pc_id]
    finally:
        await caller.close()

    backchannel_end_sent = said.time_of_sample(round(backchannel.speech_end_s * backchannel.sample_rate))
    assert barge_in.interruptions == []
    assert [b.text for b in barge_in.backchannels] and all(
        barge_in.policy.is_backchannel(b.text) for b in barge_in.backchannels
    )
    # The bot kept talking to the end of its answer, and answered nothing else.
    request = [r for r in answers(served, dialled_at) if "hours" in r.last_user_text.lower()][-1]
    assert request.completed and not request.disconnected
    assert answers(served, said.sent_at[0]) == []
    assert audible(caller, after=backchannel_end_sent)
    assert barge_in.turns[0].last_audio_out_at > backchannel_end_sent
    # The transcript has it as a backchannel; the LLM context does not.
    inputs = [m["data"] for m in caller.messages_of("user-input")]
    assert any(d.get("input_type") == "backchannel" for d in inputs), inputs
    assert [m["content"] for m in call.context.messages if m["role"] == "assistant"] == [SHORT_ANSWER]
    [user] = [m["content"] for m in call.context.messages if m["role"] == "user"]  # the question only
    assert "hours" in user.lower()


def cough(sample_rate: int) -> np.ndarray:
    """Two coughs: bursts of band-limited noise, sharp onset and ~0.25 s decay, as loud as speech."""
    rng = np.random.default_rng(7)
    burst_s, gap_s = 0.3, 0.15
    t = np.arange(round(burst_s * sample_rate)) / sample_rate
    envelope = np.minimum(t / 0.015, 1.0) * np.exp(-t / 0.09)
    kernel = np.hanning(9) / np.hanning(9).sum()  # a gentle low-pass: a chest, not a hiss
    bursts = [np.convolve(rng.standard_normal(len(t)), kernel, mode="same") * envelope for _ in range(2)]
    gap = np.zeros(round(gap_s * sample_rate))
    sound = np.concatenate([bursts[0], gap, bursts[1], np.zeros(round(0.6 * sample_rate))])
    return (sound / np.abs(sound).max() * 0.6 * 32767).astype(np.int16)


async def test_a_cough_over_the_answer_does_not_end_it_the_whole_answer_is_heard(served):
    question = synthesize_speech("What are your hours?", tail_silence=0.0)
    mic = ScriptedMicrophone(question.sample_rate)
    barge_in = await dial(served, mic)
    caller = served.caller
    try:
        mic.say(question.samples)
        await until(lambda: len(audible(caller)) * 0.02 >= 1.0, "the answer under way", timeout=30)
        said = mic.say(cough(question.sample_rate))
        await said.done.wait()
        call = served.app.state.calls.calls[caller.pc_id]

        def heard() -> str:
            return " ".join(m["content"] for m in call.context.messages if m["role"] == "assistant")

        # The answer's last sentence reaches the context once it went out: never stopped, or said on.
        last_sentence = SHORT_ANSWER.split(". ")[-1]
        await until(lambda: heard().endswith(last_sentence), lambda: f"the answer to go on: [{heard()}]", timeout=30)
        await asyncio.sleep(0.5)
    finally:
        await caller.close()

    print(f"\ncough over the answer: interruptions {[(i.phase, i.text) for i in barge_in.interruptions]}, "
          f"said on {barge_in.resumed}")
    assert [r for r in served.llm.requests if r.received_at > said.sent_at[0] and r.tokens_sent] == []
    assert barge_in.stale_frames == 0
    assert len(barge_in.resumed) == len(barge_in.interruptions)  # each stop, if any, was said on
    assert audible(caller, after=said.sent_at[-1])  # the bot was still talking after the cough
    [user] = [m["content"] for m in call.context.messages if m["role"] in ("user", "developer")]
    assert "hours" in user.lower()  # nothing of the cough reached the LLM

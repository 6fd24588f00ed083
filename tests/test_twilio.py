"""Phone calls over Twilio Media Streams, against the real server and real models.

The caller is ``agent/caller/twilio_caller.py``: Twilio's side of the protocol over a real
WebSocket on loopback, streaming espeak-ng speech as 20 ms mu-law media events in real time.
The LLM is ``agent/bench/scripted_llm.py`` (a real OpenAI-compatible server with fixed answers) so an
answer is long enough to cut into; VAD, Whisper and the voice are the embedded ones.
"""

import asyncio
import time
from xml.etree import ElementTree

import httpx
import numpy as np
import pytest
import pytest_asyncio
import websockets
from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter
from pipecat.frames.frames import InputAudioRawFrame
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.transports.base_input import BaseInputTransport
from twilio.request_validator import RequestValidator

from agent.bench.conditions import pink_noise
from agent.config import load_config
from agent.caller.loopback import serve_app
from agent.runtime.runtime import Runtime
from agent.bench.scripted_llm import ScriptedLLM
from agent.server import create_app
from agent.call.admission import CallAdmission
from agent.transports.twilio import (
    STREAM_PATH,
    TwilioPhone,
    busy_twiml,
    stream_token,
    stream_token_valid,
    stream_twiml,
    webhook_params,
)
from agent.caller.twilio_caller import SAMPLE_RATE, TwilioMediaStreamClient
from tests.routers import include_first
from tests.speech import normalize_text, synthesize_speech
from tests.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")

AUTH_TOKEN = "twilio-auth-token-for-tests"
QUESTION = "What time do you open on Saturday?"
THANKS = "Thank you very much."
# tiny.en on espeak-ng speech at 8 kHz mishears small words ("do" -> "will"); the words that
# carry the question are what must come through.
QUESTION_WORDS = {"time", "open", "saturday"}
THANKS_WORDS = {"thank", "much"}
LONG_ANSWER = (
    "We are open from nine in the morning until six in the evening, Monday to Friday. "
    "On Saturdays we open at ten and close at four, and on Sundays we are closed all day. "
    "During public holidays the hours can change, so please check our website before you come."
)
SHORT_ANSWER = "You are welcome. Goodbye!"


def answer_for(messages: list[dict]) -> str:
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    return SHORT_ANSWER if "thank" in str(last.get("content", "")).lower() else LONG_ANSWER


@pytest.fixture(scope="module")
def llm() -> ScriptedLLM:
    return ScriptedLLM(ttft_s=0.3, tokens_per_s=30, answer_for=answer_for)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def phone_runtime(llm):
    # The embedded ASR and voice, with the scripted LLM as an external OpenAI-compatible one.
    async with serve_app(llm.app()) as llm_url:
        # The LLM's answer over the phone is under test: the fast path would answer its question.
        runtime = Runtime(load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", fast_path=False))
        await runtime.start()
        yield runtime
        await runtime.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def filtered_runtime(llm):
    # As phone_runtime, with pipecat's RNNoise filter on every call's input.
    async with serve_app(llm.app()) as llm_url:
        runtime = Runtime(load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", fast_path=False,
                                      noise_filter="rnnoise"))
        await runtime.start()
        yield runtime
        await runtime.stop()


class InputAudioProbe(BaseObserver):
    """Records the audio frames the input transport pushes: rate, size and their samples."""

    def __init__(self):
        super().__init__()
        self.frames: list[tuple[int, int]] = []
        self.audio: list[bytes] = []

    async def on_push_frame(self, data: FramePushed):
        if isinstance(data.frame, InputAudioRawFrame) and isinstance(data.source, BaseInputTransport):
            self.frames.append((data.frame.sample_rate, len(data.frame.audio)))
            self.audio.append(data.frame.audio)


class PhoneServer:
    """A real Brisk server on loopback with the Twilio routes, and the calls it assembled."""

    def __init__(self, base_url: str, phone: TwilioPhone):
        self.base_url = base_url
        self.phone = phone
        self.calls = []  # Call objects, in the order calls started
        self.probes: list[InputAudioProbe] = []
        phone.listeners.append(self._on_call)

    def _on_call(self, _stream_sid, call):
        probe = InputAudioProbe()
        call.worker.add_observer(probe)
        self.calls.append(call)
        self.probes.append(probe)

    @property
    def host(self) -> str:
        return self.base_url.removeprefix("http://")

    async def incoming_call(self, form: dict, headers: dict | None = None) -> httpx.Response:
        async with httpx.AsyncClient() as http:
            return await http.post(f"{self.base_url}/twilio/voice", data=form, headers=headers or {})


def phone_server(runtime, **phone_kwargs):
    class Served:
        async def __aenter__(self):
            phone = TwilioPhone(runtime, **phone_kwargs)
            app = include_first(create_app(runtime.config, runtime=runtime), phone.router)
            self._serving = serve_app(app)
            return PhoneServer(await self._serving.__aenter__(), phone)

        async def __aexit__(self, *exc):
            await self._serving.__aexit__(*exc)

    return Served()


def sign(auth_token: str, url: str, params) -> str:
    """The X-Twilio-Signature Twilio would send: its own RequestValidator's signature."""
    return RequestValidator(auth_token).compute_signature(url, params)


def heard(transcript: str, words: set[str]) -> bool:
    return words <= set(normalize_text(transcript).split())


def stream_of(twiml: str) -> tuple[str, dict[str, str]]:
    root = ElementTree.fromstring(twiml)
    stream = root.find("./Connect/Stream")
    return stream.get("url"), {p.get("name"): p.get("value") for p in stream.findall("Parameter")}


def speech_8k(text: str, tmp_path, name: str):
    clip = synthesize_speech(text, tmp_path / f"{name}.wav", lead_silence=1.0, tail_silence=0.0)
    samples = np.frombuffer(clip.pcm(SAMPLE_RATE), dtype=np.int16)
    return samples, round(clip.speech_start_s * SAMPLE_RATE), round(clip.speech_end_s * SAMPLE_RATE)


async def wait_until_quiet(client: TwilioMediaStreamClient, quiet_s: float = 1.5, timeout: float = 30.0):
    """Wait until no audible audio has arrived for ``quiet_s``."""

    def quiet():
        audible = [m.t for m in client.media if m.rms >= 300]
        return audible and time.monotonic() - audible[-1] >= quiet_s

    await until(quiet, timeout=timeout)


# -- the webhook ---------------------------------------------------------------------------


async def test_the_voice_webhook_connects_the_call_to_the_media_stream(phone_runtime):
    async with phone_server(phone_runtime) as server:
        response = await server.incoming_call({"CallSid": "CA1", "From": "+15550100", "To": "+15550199"})

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/xml")
    url, parameters = stream_of(response.text)
    assert url == f"wss://{server.host}{STREAM_PATH}"
    assert parameters == {}


async def test_the_stream_url_follows_the_public_url_and_forwarded_headers(phone_runtime):
    async with phone_server(phone_runtime, public_url="https://brisk.example.com") as server:
        public = await server.incoming_call({"CallSid": "CA1"})
    async with phone_server(phone_runtime) as server:
        proxied = await server.incoming_call(
            {"CallSid": "CA1"}, {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "edge.example.com"}
        )

    assert stream_of(public.text)[0] == "wss://brisk.example.com/ws/twilio"
    assert stream_of(proxied.text)[0] == "wss://edge.example.com/ws/twilio"


async def test_webhooks_without_a_valid_signature_are_rejected_when_an_auth_token_is_set(phone_runtime):
    form = {"CallSid": "CA42", "From": "+15550100", "To": "+15550199", "AccountSid": "AC1"}
    url = "https://brisk.example.com/twilio/voice"
    async with phone_server(phone_runtime, auth_token=AUTH_TOKEN, public_url="https://brisk.example.com") as server:
        unsigned = await server.incoming_call(form)
        forged = await server.incoming_call(form, {"X-Twilio-Signature": sign("wrong", url, form)})
        tampered = await server.incoming_call(
            {**form, "From": "+15550666"}, {"X-Twilio-Signature": sign(AUTH_TOKEN, url, form)}
        )
        signed = await server.incoming_call(form, {"X-Twilio-Signature": sign(AUTH_TOKEN, url, form)})

    assert [r.status_code for r in (unsigned, forged, tampered)] == [403, 403, 403]
    assert signed.status_code == 200
    assert stream_token_valid(AUTH_TOKEN, "CA42", stream_of(signed.text)[1]["token"])


async def test_the_signature_is_twilios_documented_hmac_sha1_of_url_and_sorted_parameters():
    # Test vectors from Twilio's own request validator tests (twilio-python), on the form
    # bodies as the webhook parses them.
    validator = RequestValidator("12345")
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    params = webhook_params(
        b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"
    )
    assert validator.compute_signature(url, params) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    # A key sent several times signs each of its values, sorted (and once each).
    repeated = webhook_params(b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234")
    assert validator.compute_signature(url, repeated) == "IK+Dwps556ElfBT0I3Rgjkr1wJU="
    # Twilio may sign the URL with or without the default port.
    assert validator.validate(url, params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
    assert validator.validate(url, params, "kvajT1Ptam85bY51eRf/AJRuM3w=")  # https://...:443/...
    assert validator.validate(url.replace("https", "http"), params, "0ZXoZLH/DfblKGATFgpif+LLRf4=")  # :80
    assert not validator.validate(url, params, "")
    assert not validator.validate(url.replace("foo=1", "foo=2"), params, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")


async def test_the_webhook_checks_the_url_twilio_signed_port_query_and_repeated_keys(phone_runtime):
    form = {"CallSid": "CA43", "From": "+15550100"}
    repeated = {**form, "Digits": ["5678", "1234"]}  # posted as Digits=5678&Digits=1234
    public = "https://brisk.example.com/twilio/voice"

    def signed(url, params):
        return {"X-Twilio-Signature": sign(AUTH_TOKEN, url, params)}

    async with phone_server(phone_runtime, auth_token=AUTH_TOKEN, public_url="https://brisk.example.com") as server:
        with_port = await server.incoming_call(form, signed("https://brisk.example.com:443/twilio/voice", form))
        # Every value of a repeated key is signed, not one of them.
        every_value = await server.incoming_call(
            repeated, signed(public, webhook_params(b"CallSid=CA43&From=%2B15550100&Digits=5678&Digits=1234"))
        )
        one_value = await server.incoming_call(repeated, signed(public, {**form, "Digits": "1234"}))
        # The query string is part of the signed URL.
        async with httpx.AsyncClient() as http:
            query, query_unsigned = [
                await http.post(f"{server.base_url}/twilio/voice?region=eu", data=form, headers=signed(url, form))
                for url in (f"{public}?region=eu", public)
            ]
    async with phone_server(phone_runtime, auth_token=AUTH_TOKEN) as server:
        # Without a public URL, the URL Twilio signed is the proxy's, else the Host's.
        edge = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "edge.example.com"}
        direct_url = f"http://{server.host}/twilio/voice"
        forwarded = await server.incoming_call(form, {**edge, **signed("https://edge.example.com/twilio/voice", form)})
        direct = await server.incoming_call(form, signed(direct_url, form))
        behind_proxy = await server.incoming_call(form, {**edge, **signed(direct_url, form)})

    assert [r.status_code for r in (with_port, every_value, query, forwarded, direct)] == [200] * 5
    assert [r.status_code for r in (one_value, query_unsigned, behind_proxy)] == [403] * 3
    assert stream_token_valid(AUTH_TOKEN, "CA43", stream_of(with_port.text)[1]["token"])


async def test_the_twiml_is_twilios_stream_and_busy_verbs_escaped():
    twiml = stream_twiml("wss://brisk.example.com/ws/twilio", {"token": 'a&b<"c>', "lang": "en"})
    assert twiml.startswith('<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream ')
    assert stream_of(twiml) == ("wss://brisk.example.com/ws/twilio", {"token": 'a&b<"c>', "lang": "en"})
    assert [p.get("name") for p in ElementTree.fromstring(twiml).iter("Parameter")] == ["token", "lang"]
    assert stream_of(stream_twiml("wss://h/ws/twilio", {})) == ("wss://h/ws/twilio", {})
    root = ElementTree.fromstring(busy_twiml("All lines are busy & full."))
    assert [(e.tag, e.text) for e in root] == [("Say", "All lines are busy & full."), ("Hangup", None)]


async def test_a_caller_beyond_the_limit_hears_that_the_lines_are_busy_and_the_call_ends(phone_runtime):
    # One limit for every transport: a browser call holding the only line makes the phone busy.
    admission = CallAdmission(1)
    browser_call = admission.admit("webrtc", "pc-1")
    async with phone_server(phone_runtime, admission=admission, busy_text="All lines are busy.") as server:
        response = await server.incoming_call({"CallSid": "CA1", "From": "+15550100123"})
        root = ElementTree.fromstring(response.text)
        assert [(e.tag, e.text) for e in root] == [("Say", "All lines are busy."), ("Hangup", None)]
        # The call is kept as one turned away, its caller's number masked.
        busy = await phone_runtime.resources.records.call("CA1")
        assert (busy["status"], busy["caller"], busy["turn_count"]) == ("busy", "+*******0123", 0)

        browser_call.release()
        response = await server.incoming_call({"CallSid": "CA2"})
        assert ElementTree.fromstring(response.text).find("./Connect/Stream") is not None
        assert admission.by_transport() == {"twilio": 1}  # held for CA2's stream
    assert admission.refused == 1


# -- the stream ----------------------------------------------------------------------------


async def test_a_stream_without_the_token_its_call_was_given_is_refused(phone_runtime):
    async with phone_server(phone_runtime, auth_token=AUTH_TOKEN) as server:
        ws_url = f"ws://{server.host}{STREAM_PATH}"
        for parameters in ({}, {"token": stream_token(AUTH_TOKEN, "CA-some-other-call")}):
            client = TwilioMediaStreamClient(ws_url, custom_parameters=parameters)
            await client.connect()
            await asyncio.wait_for(client.closed.wait(), 10)
            await client.close()
            assert client.close_code == 1008
        assert server.calls == []


async def test_a_stream_that_is_not_8khz_mulaw_is_refused(phone_runtime):
    async with phone_server(phone_runtime) as server:
        async with websockets.connect(f"ws://{server.host}{STREAM_PATH}") as ws:
            await ws.send('{"event": "connected", "protocol": "Call", "version": "1.0.0"}')
            await ws.send(
                '{"event": "start", "streamSid": "MZ1", "start": {"streamSid": "MZ1", "callSid": "CA1",'
                ' "mediaFormat": {"encoding": "audio/x-l16", "sampleRate": 16000, "channels": 1}}}'
            )
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd.code == 1003
        assert server.calls == []


async def test_a_phone_caller_hears_the_answer_and_hangs_up_cleanly(phone_runtime, llm, tmp_path):
    samples, _, speech_end = speech_8k(QUESTION, tmp_path, "question")
    async with phone_server(phone_runtime, auth_token=AUTH_TOKEN, public_url="http://brisk.test") as server:
        form = {"CallSid": "CA7", "AccountSid": "AC1", "From": "+15550100", "To": "+15550199"}
        signature = sign(AUTH_TOKEN, "http://brisk.test/twilio/voice", form)
        stream_url, parameters = stream_of((await server.incoming_call(form, {"X-Twilio-Signature": signature})).text)
        assert stream_url == "ws://brisk.test/ws/twilio"
        client = TwilioMediaStreamClient(
            f"ws://{server.host}{STREAM_PATH}", call_sid="CA7", custom_parameters=parameters
        )
        await client.connect()
        requests_before = len(llm.requests)
        # The stream token works once: a second stream with it is refused; the call goes on.
        await until(lambda: server.calls, timeout=10)
        replay = TwilioMediaStreamClient(f"ws://{server.host}{STREAM_PATH}", call_sid="CA7", custom_parameters=parameters)
        await replay.connect()
        await asyncio.wait_for(replay.closed.wait(), 10)
        await replay.close()
        assert replay.close_code == 1008

        spoken = await client.say(samples)
        end = spoken.time_of_sample(speech_end)
        await until(lambda: client.first_audible_after(end) is not None, timeout=30)
        await wait_until_quiet(client)
        await until(lambda: "turn-1" in server.phone.calls[client.stream_sid].marks_played, timeout=10)
        phone_call = server.phone.calls[client.stream_sid]
        [call] = server.calls
        closed_by_server = await client.hang_up()
        await until(lambda: server.phone.active == 0, timeout=10)

    # What the caller said was understood, and answered out loud.
    [record] = call.latency.turns[:1]
    assert heard(record["user_text"], QUESTION_WORDS), record["user_text"]
    # The LLM was asked what the caller said (other requests, e.g. a cache warm-up, may come too).
    assert record["user_text"] in [r.last_user_text.strip() for r in llm.requests[requests_before:]]
    answer = client.audio_between(end, time.monotonic())
    assert len(answer) / SAMPLE_RATE > 2.0  # seconds of speech, at 8 kHz
    assert {e["streamSid"] for _, e in client.events} | {client.stream_sid} == {client.stream_sid}
    # The mark came after the answer's audio, and the phone reported it played.
    [(mark_at, mark)] = client.events_of("mark")
    assert mark["mark"]["name"] == "turn-1"
    assert mark_at >= max(m.t for m in client.media if m.rms >= 300)
    assert [name for _, name in client.marks_echoed] == ["turn-1"]
    assert phone_call.marks_played["turn-1"] >= phone_call.marks_sent["turn-1"]
    # 8 kHz in: every media event became one 20 ms frame at 8 kHz, nothing resampled or held.
    probe = server.probes[0]
    assert set(probe.frames) == {(SAMPLE_RATE, 320)}
    assert len(probe.frames) >= round((end - spoken.start_time) * SAMPLE_RATE / 160)
    # Stopping the stream ended the call: the server hung up its side.
    assert phone_call.caller_hung_up
    assert closed_by_server
    # pipecat interrupts at every start of user speech; a clear then empties an empty buffer,
    # but nothing may clear the answer itself.
    assert all(t < client.first_audible_after(end) for t, _ in client.events_of("clear"))
    # The call's record: the phone transport, the caller's number masked, the turn kept.
    kept = await phone_runtime.resources.records.call("CA7")
    assert kept["transport"] == "twilio" and kept["status"] == "completed" and "0100" in kept["caller"]
    assert "+15550100" not in kept["caller"] and kept["turns"][0]["user_text"] == record["user_text"]


async def test_with_the_noise_filter_on_each_phone_call_is_denoised_by_its_own_filter_before_the_vad(
        filtered_runtime, tmp_path):
    samples, speech_start, _ = speech_8k(QUESTION, tmp_path, "question")
    # A caller's room: pink noise 15 dB under the speech, from the first sample.
    speech_rms = float(np.sqrt(np.mean(samples[speech_start:].astype(np.float64) ** 2)))
    noise = pink_noise(len(samples), seed=5) * speech_rms / 10 ** (15 / 20)
    noisy = np.clip(samples + noise, -32768, 32767).astype(np.int16)
    lead = slice(round(0.2 * SAMPLE_RATE), round(0.9 * SAMPLE_RATE))  # noise alone, before the words
    sent_rms = float(np.sqrt(np.mean(noisy[lead].astype(np.float64) ** 2)))
    async with phone_server(filtered_runtime) as server:
        async def one_call(sid: str):
            stream_url, parameters = stream_of((await server.incoming_call(
                {"CallSid": sid, "AccountSid": "AC1", "From": "+15550100", "To": "+15550199"})).text)
            client = TwilioMediaStreamClient(f"ws://{server.host}{STREAM_PATH}", call_sid=sid,
                                             custom_parameters=parameters)
            await client.connect()
            await client.say(noisy)
            return client

        # Two calls at once, each speaking into its own stream.
        clients = await asyncio.gather(one_call("CA31"), one_call("CA32"))
        await until(lambda: len(server.calls) == 2 and all(c.latency.turns for c in server.calls), timeout=30)
        calls, probes = list(server.calls), list(server.probes)
        for client in clients:
            await client.hang_up()
        await until(lambda: server.phone.active == 0, timeout=10)

    filters = [call.processors[0]._params.audio_in_filter for call in calls]
    assert all(isinstance(f, RNNoiseFilter) for f in filters) and filters[0] is not filters[1]
    for call, probe in zip(calls, probes):
        # What the VAD got: the noise before the words taken down by more than 10 dB ...
        heard_audio = np.frombuffer(b"".join(probe.audio), dtype=np.int16)
        got_rms = float(np.sqrt(np.mean(heard_audio[lead].astype(np.float64) ** 2)))
        assert got_rms < sent_rms / 10 ** (10 / 20), (got_rms, sent_rms)
        # ... and the question still heard (RNNoise costs words on narrowband espeak: "What, I'm
        # doing open on Saturday."; docs/benchmarks.md measures it, and why it is off by default).
        assert heard(call.latency.turns[0]["user_text"], {"open", "saturday"}), call.latency.turns[0]["user_text"]


async def test_barge_in_clears_the_phones_audio_at_once(phone_runtime, llm, tmp_path):
    question, _, question_end = speech_8k(QUESTION, tmp_path, "question")
    thanks, thanks_start, thanks_end = speech_8k(THANKS, tmp_path, "thanks")
    thanks = thanks[thanks_start - SAMPLE_RATE // 5 :]  # no second of silence before cutting in
    thanks_start, thanks_end = SAMPLE_RATE // 5, thanks_end - thanks_start + SAMPLE_RATE // 5
    async with phone_server(phone_runtime) as server:
        client = TwilioMediaStreamClient(f"ws://{server.host}{STREAM_PATH}")
        await client.connect()

        first = await client.say(question)
        answer_start = None

        def answering():
            nonlocal answer_start
            answer_start = client.first_audible_after(first.time_of_sample(question_end))
            return answer_start is not None

        await until(answering, timeout=30)
        await asyncio.sleep(1.0)  # the long answer is playing
        second = await client.say(thanks)
        cut_in, cut_in_end = second.time_of_sample(thanks_start), second.time_of_sample(thanks_end)
        await until(lambda: client.first_audible_after(cut_in_end) is not None, timeout=30)
        await wait_until_quiet(client)
        await until(lambda: len(client.events_of("mark")) == 1, timeout=10)
        [call] = server.calls
        await client.hang_up()

    # pipecat also interrupts (harmlessly) at the first question; one clear cut the answer.
    [(cleared_at, clear)] = [(t, e) for t, e in client.events_of("clear") if t > answer_start]
    assert clear["streamSid"] == client.stream_sid
    # Sent while the caller was still talking over the answer, and the answer stopped there.
    assert cut_in < cleared_at < cut_in_end
    assert client.first_audible_after(cleared_at) > cut_in_end
    interrupted, thanked = call.latency.turns[:2]
    assert interrupted["interrupted"] is True
    assert heard(thanked["user_text"], THANKS_WORDS), thanked["user_text"]
    # Only the answer that played to the end was marked.
    [(_, mark)] = client.events_of("mark")
    assert mark["mark"]["name"] == f"turn-{thanked['turn']}"

"""``agent bench --suite turns``: when does each end-of-turn policy decide the caller is done?

    python -m agent bench --suite turns [--turns N] [--condition web,phone,...] [--json PATH]

Utterances a caller says (``TURNS_CORPUS``): complete ones, and ones with a 0.5-1.2 s pause
mid-sentence (after "and", "um", "my number is", inside a list or a spelled name, and some
with no word that gives the pause away), in eight espeak voices and the recorded CMU ARCTIC
clip, whole and with a pause put into its comma's gap; and the same texts in a neural voice
(``NEURAL_TURNS``, hibari's "heart"), said whole and cut where the pause goes, because espeak's
flat pitch tells an audio model nothing a person's voice would. Each is played in real time
(20 ms frames on an absolute schedule) into Brisk's real front end, Silero VAD then the
streaming Whisper STT, and from there into one pipecat user aggregator per policy, side by side
(a ``ParallelPipeline``), so every policy hears the same audio, the same VAD events and the same
transcripts at the same moments:

- ``brisk``: Brisk's end of turn as configured (``processors/turns/adaptive_user_turn_stop.py``):
  the short timeout after finished words, up to ``BRISK_TURN_UNFINISHED_WAIT_SECS`` after
  unfinished ones, and a statement whose words look finished put to the audio model
  (``BRISK_TURN_AUDIO_CHECK``, on; ``BRISK_TURN_AUDIO_MODEL``, LiveKit's end-of-turn model).
- ``brisk_words``: the same on the words alone.
- ``brisk_audio``: the words, with Smart Turn v3 as the audio model.
- ``brisk_fixed``: Brisk's end of turn before all this, pipecat's
  ``SpeechTimeoutUserTurnStopStrategy`` at ``BRISK_TURN_STOP_TIMEOUT_SECS``.
- ``smart_turn_v3``: stock pipecat's default, ``TurnAnalyzerUserTurnStopStrategy`` with the
  bundled Smart Turn v3 model on the audio.

A policy's turn end is when its aggregator asks the LLM (``LLMContextFrame``): where the bot
starts answering. A *false cut-off* is a turn end before the caller has finished (inside a
pause, or over the words after it). The *end-of-turn delay* is the first turn end after the
true end of speech (known from the samples), minus that end. Reported per policy: false
cut-offs on the paused utterances (and on the complete ones, whose own short gaps can cut them
too), and the delay's P50/P95 on complete utterances, over all voices (``"policies"``) and per
family (``"voices"``: ``espeak``, ``natural`` = the neural voice and the recording); JSON key
``"turns"``.

``--condition`` plays every utterance through each channel in turn (agent/bench/conditions.py's
names: ``web``, 16 kHz PCM as a browser sends it, the default; ``phone``, 8 kHz decoded from G.711
mu-law, what a Twilio media stream carries, into a pipeline that runs at 8 kHz as a phone call's
does; ``+noisy`` / ``+noisy10``, pink noise at 20 / 10 dB SNR mixed in first). The same summaries
per condition under ``"conditions"``; ``"policies"`` and ``"voices"`` are the first condition's.

What this does not include: a caller who goes on after a cut-off is merged into one question
by ``processors/turns/turn_continuation.py``, so in a call a cut-off costs an answer that is
cancelled, not a wrong one; here it is counted as the cut-off it is.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, replace

import numpy as np
import psutil
from pipecat.frames.frames import EndFrame, Frame, InputAudioRawFrame, LLMContextFrame
from pipecat.pipeline.parallel_pipeline import ParallelPipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregator, LLMUserAggregatorParams
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.turns.user_start import TranscriptionUserTurnStartStrategy, VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies, default_user_turn_stop_strategies

from agent.audio import espeak_speech, find_speech_end, read_wav, speech_segments, without_digital_silence
from agent.bench.conditions import Condition, noisy
from agent.bench.corpus import Utterance, arctic_a0009_path, spoken
from agent.bench.overhead import feed_pipeline
from agent.bench.phone import phone_line
from agent.bench.stats import fmt, percentiles
from agent.config import BriskConfig, load_config
from agent.call.pipeline import TWILIO_SAMPLE_RATE
from agent.call.stages import make_vad
from processors.stt.streaming_whisper import StreamingWhisperSTTService
from processors.turns.adaptive_user_turn_stop import AdaptiveUserTurnStopStrategy
from processors.turns.livekit_eot_check import LiveKitEotCheck
from processors.turns.smart_turn_check import SmartTurnCheck
from processors.stt.whisper_scheduler import WhisperScheduler

RATE = 16000
FRAME_S = 0.02
LEAD_S = 1.0
# Long enough for Smart Turn's own fallback (3 s of silence) to end a turn it judged incomplete.
TAIL_S = 3.6
POLICIES = ("brisk", "brisk_words", "brisk_audio", "brisk_fixed", "smart_turn_v3")
ARCTIC_PAUSE_MS = 800

TURNS_CORPUS: tuple[Utterance, ...] = (
    # complete
    spoken("c-open-saturday", "complete", "en-us", 160, "What time do you open on Saturday?"),
    spoken("c-where-shop", "complete", "en-us+m3", 160, "Where is your shop?"),
    spoken("c-tune-up", "complete", "en-us+f2", 170, "How much is a basic tune-up?"),
    spoken("c-cash", "complete", "en-029", 150, "Can I pay with cash?"),
    spoken("c-book-tomorrow", "complete", "en-gb", 160, "I'd like to book a city bike for tomorrow."),
    spoken("c-order-number", "complete", "en-gb-x-rp", 155, "My order number is four five seven two."),
    spoken("c-scooters", "complete", "en-us+f5", 165, "Do you repair electric scooters?"),
    spoken("c-return-helmet", "complete", "en-gb-scotland", 170, "I bought a helmet last week and I want to return it."),
    spoken("c-parking", "complete", "en-us", 175, "Is there parking near the shop?"),
    spoken("c-person", "complete", "en-029", 140, "Can I speak to a person, please?"),
    spoken("c-thanks", "complete", "en-gb", 160, "That's all, thank you."),
    spoken("c-book-it", "complete", "en-us+m3", 150, "Yes, please book it."),
    spoken("c-two-bikes", "complete", "en-us+f2", 160, "Two bikes."),
    spoken("c-christmas", "complete", "en-gb-x-rp", 150, "Are you open on Christmas Day?"),
    spoken("c-phone", "complete", "en-us", 185, "What is your phone number?"),
    spoken("c-order-lost", "complete", "en-gb-scotland", 160, "I think my order is lost."),
    spoken("c-tune-up-time", "complete", "en-us+f5", 170, "How long does a tune-up take?"),
    spoken("c-kids-helmets", "complete", "en-029", 160, "Do you sell helmets for children?"),
    spoken("c-um-rent", "complete", "en-us", 150, "Um, do you rent electric bikes?"),
    spoken("c-opening-times", "complete", "en-gb", 165, "Could you tell me your opening times?"),
    spoken("c-cancel", "complete", "en-us+m3", 170, "I'd like to cancel my booking."),
    # Whole questions that end on a preposition, as callers ask them: the words alone can't
    # tell them from a caller pausing mid-question ("Can I bring it in on ..."), and a rule that
    # holds them for the audio model shows its cost here.
    spoken("c-where-at", "complete", "en-gb", 165, "Where are you guys at?"),
    spoken("c-ring-on", "complete", "en-us+f2", 160, "What's the best number to ring you on?"),
    spoken("c-speaking-to", "complete", "en-gb-scotland", 160, "Who am I speaking to?"),
    spoken("c-arctic", "complete", "arctic", 0, "He turned sharply, and faced Gregson across the table."),
    # a pause mid-sentence
    spoken("p-order-number", "paused", "en-us", 160,
           "My order number is", 900, "four five seven two, and I want to know where it is."),
    spoken("p-rental-list", "paused", "en-gb", 160,
           "I would like to rent two bikes for Saturday,", 800, "and a child seat if you have one."),
    spoken("p-um-close", "paused", "en-us+f2", 160, "Um,", 700, "what time do you close today?"),
    spoken("p-list", "paused", "en-us+m3", 160, "I need a helmet,", 600, "a lock,", 600, "and a pump."),
    spoken("p-spelled", "paused", "en-gb-x-rp", 150, "My name is Anna, that's A N", 700, "N A."),
    spoken("p-because", "paused", "en-029", 155, "I want to return it because", 1000, "it's too small."),
    spoken("p-phone", "paused", "en-us+f5", 160, "My phone number is five five five", 900, "zero one four two."),
    spoken("p-tell-me", "paused", "en-gb-scotland", 165, "Could you tell me", 800, "when you open on Sunday?"),
    spoken("p-wondering", "paused", "en-us", 150, "I was wondering if", 1100, "you rent electric bikes."),
    spoken("p-and", "paused", "en-gb", 170, "I'd like a city bike and", 600, "an electric bike for Sunday."),
    spoken("p-uh-flat", "paused", "en-us+m3", 160, "Uh,", 1200, "how much is a flat tire repair?"),
    spoken("p-has-a", "paused", "en-us+f2", 165, "The bike I bought last week has a", 900, "squeaky brake."),
    spoken("p-on", "paused", "en-029", 150, "Can I bring it in on", 700, "Monday morning?"),
    spoken("p-um-mid", "paused", "en-gb-x-rp", 160, "I ordered a lock, um,", 1000, "and it hasn't arrived yet."),
    spoken("p-do-you-have", "paused", "en-us+f5", 175, "Do you have", 500, "kids' bikes in stock?"),
    spoken("p-order-long", "paused", "en-gb", 160, "My order number is", 1200, "one two three four."),
    spoken("p-book", "paused", "en-gb-scotland", 160, "I'd like to book", 800, "two city bikes for tomorrow."),
    spoken("p-thing-is", "paused", "en-us", 165, "So the thing is,", 900, "my tire keeps going flat."),
    spoken("p-son-and", "paused", "en-us+m3", 160, "It's for my son and", 700, "my daughter."),
    spoken("p-price-of", "paused", "en-029", 165, "What's the price of", 600, "an electric bike for a day?"),
    spoken("p-charged", "paused", "en-us+f2", 170,
           "Um, I was charged twice for the same order,", 1000, "and I'd like a refund."),
    spoken("p-arctic", "paused", "arctic", 0, "He turned sharply,", ARCTIC_PAUSE_MS, "and faced Gregson across the table."),
)
# The same utterances in a neural voice (hibari's "heart"), whose prosody is a person's: an audio
# end-of-turn model hears espeak's flat synthetic pitch as neither finished nor unfinished. A
# paused one is said whole and cut where its words part (``NeuralVoice``), so the words before
# the pause sound mid-sentence, as a caller who stops to think sounds.
NEURAL_TURNS: tuple[Utterance, ...] = tuple(
    replace(u, id=f"n-{u.id}", voice="hibari", wpm=0) for u in TURNS_CORPUS if u.voice != "arctic")


@dataclass(frozen=True)
class TurnClip:
    utterance: Utterance
    samples: np.ndarray
    speech_end_s: float  # the true end of speech (agent.audio.find_speech_end), in stream seconds
    pauses: tuple[tuple[float, float], ...]  # (start, end) of each mid-sentence pause
    cut: str = "whole"  # how a paused utterance's parts were made (NeuralVoice.parts)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), dtype=np.int16)


def _arctic_parts(utterance: Utterance) -> list[np.ndarray]:
    """The ARCTIC clip whole, or cut at its comma: the widest quiet gap in its middle."""
    recorded, _ = read_wav(arctic_a0009_path(), target_rate=RATE)
    voiced = speech_segments(recorded, RATE, min_gap_s=0.02)
    speech = recorded[round(voiced[0][0] * RATE): round(voiced[-1][1] * RATE)]
    if len(utterance.segments) == 1:
        return [speech]
    start = voiced[0][0]
    gaps = [(b_start - a_end, a_end, b_start) for (_, a_end), (b_start, _) in zip(voiced, voiced[1:])
            if 0.2 < (a_end - start) / (voiced[-1][1] - start) < 0.6]
    _, cut_from, cut_to = max(gaps)
    return [recorded[round(voiced[0][0] * RATE): round(cut_from * RATE)],
            recorded[round(cut_to * RATE): round(voiced[-1][1] * RATE)]]


class NeuralVoice:
    """hibari's bundled voice, with Whisper (base) to find where a whole utterance's words part.

    Numerals are suppressed so Whisper writes "four five seven two" as words, which lines its
    words up with the corpus's; fillers, which Whisper leaves out, are not counted. Where the
    words still cannot be lined up (letters spelled, a word misheard), the parts are said one by
    one instead: ``cut`` in the row says which.
    """

    def __init__(self):
        from faster_whisper import WhisperModel
        from hibari import Hibari

        from agent.runtime.models import whisper_model_path

        self.voice = Hibari()
        self.whisper = WhisperModel(str(whisper_model_path("base")), device="cpu", compute_type="int8")
        self._numerals = [-1] + [i for token, i in self.whisper.hf_tokenizer.get_vocab().items()
                                 if any(c.isdigit() for c in token)]

    def say(self, text: str) -> np.ndarray:
        import soxr
        from hibari import SAMPLE_RATE

        audio = soxr.resample(self.voice(text, seed=0), SAMPLE_RATE, RATE)
        return (np.clip(audio, -1, 1) * 32767 * 0.7).astype(np.int16)

    def parts(self, utterance: Utterance) -> tuple[list[np.ndarray], str]:
        """The utterance's spoken parts, and how they were made ("whole", "aligned", "separate")."""
        if len(utterance.segments) == 1:
            return [self.say(utterance.text)], "whole"
        whole = self.say(utterance.text)
        segments, _ = self.whisper.transcribe(whole.astype(np.float32) / 32768, word_timestamps=True,
                                              language="en", beam_size=5, suppress_tokens=self._numerals)
        heard = [w for s in segments for w in s.words if _plain(w.word) not in _FILLERS]
        words = [_plain(w.word) for w in heard]
        expected = _words(utterance.text)
        cuts, said = [], 0
        for segment in utterance.segments[:-1]:
            said += len(_words(segment))
            if words[:said + 1] != expected[:said + 1]:
                # Without hibari's own padding: it added ~0.4 s either side, and the spelled
                # name's 0.7 s pause was 1.46 s of silence in the clip.
                return [without_digital_silence(self.say(s)) for s in utterance.segments], "separate"
            cuts.append(round(heard[said].start * RATE))  # where the next word starts
        bounds = [0, *cuts, len(whole)]
        return [whole[a:b] for a, b in zip(bounds, bounds[1:])], "aligned"


_FILLERS = ("um", "uh", "")  # Whisper mostly leaves fillers out; a cut falls after them


def _plain(word: str) -> str:
    return re.sub(r"[^a-z]", "", word.lower())


def _words(text: str) -> list[str]:
    return [w for w in map(_plain, text.split()) if w not in _FILLERS]


def render_turn(utterance: Utterance, neural: NeuralVoice | None = None) -> TurnClip:
    """The utterance's audio with lead and tail silence, and where its pauses and its end are."""
    how = "whole" if len(utterance.segments) == 1 else "separate"
    if utterance.voice == "arctic":
        parts = _arctic_parts(utterance)
    elif utterance.voice == "hibari":
        parts, how = (neural or NeuralVoice()).parts(utterance)
    else:
        parts = [espeak_speech(s, utterance.voice, utterance.wpm, RATE) for s in utterance.segments]
    pieces, pauses, t = [_silence(LEAD_S)], [], LEAD_S
    for i, part in enumerate(parts):
        pieces.append(part)
        t += len(part) / RATE
        if i < len(utterance.pauses_ms):
            pause_s = utterance.pauses_ms[i] / 1000
            pieces.append(_silence(pause_s))
            pauses.append((t, t + pause_s))
            t += pause_s
    pieces.append(_silence(TAIL_S))
    samples = np.concatenate(pieces)
    # The end of speech the way every bench finds it (agent call too): espeak's quiet decay after
    # the last segment is not speech a listener waits for.
    return TurnClip(utterance, samples, find_speech_end(samples, RATE) or t, tuple(pauses), how)


class _TurnEnds(FrameProcessor):
    """The end of one policy's branch: notes when its aggregator asked the LLM."""

    def __init__(self, policy: str):
        super().__init__(name=f"turn-ends-{policy}")
        self.times: list[float] = []
        self.asked: list[str] = []  # the user message each turn end wrote

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and not frame.speculation:
            self.times.append(time.monotonic())
            self.asked.append(str(frame.context.get_messages()[-1].get("content", "")))
            return  # nothing after this branch answers
        await self.push_frame(frame, direction)


def stop_strategies(policy: str, config: BriskConfig, checks: dict) -> list:
    """One policy's stop strategies; ``checks``: the audio models by name (``smart_turn``, ``livekit_eot``)."""
    if policy in ("brisk", "brisk_words", "brisk_audio"):
        check = {"brisk": checks[config.turn_audio_model] if config.turn_audio_check else None,
                 "brisk_words": None, "brisk_audio": checks["smart_turn"]}[policy]
        return [AdaptiveUserTurnStopStrategy(user_speech_timeout=config.turn_stop_timeout_secs,
                                             max_wait_s=config.turn_unfinished_wait_secs,
                                             final_wait_s=config.turn_final_wait_secs,
                                             question_ends_at_final=config.turn_question_ends_at_final,
                                             audio_check=check)]
    if policy == "brisk_fixed":
        return [SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=config.turn_stop_timeout_secs)]
    return default_user_turn_stop_strategies()  # stock pipecat: Smart Turn v3


def _branch(policy: str, config: BriskConfig, checks: dict) -> tuple[list, _TurnEnds]:
    # No interruptions: one branch's turn start must not reach the shared VAD and STT.
    start = [VADUserTurnStartStrategy(enable_interruptions=False),
             TranscriptionUserTurnStartStrategy(enable_interruptions=False)]
    strategies = UserTurnStrategies(start=start, stop=stop_strategies(policy, config, checks))
    aggregator = LLMUserAggregator(LLMContext(), params=LLMUserAggregatorParams(user_turn_strategies=strategies))
    ends = _TurnEnds(policy)
    return [aggregator, ends], ends


WEB = Condition("web", "web")


def channel_audio(samples: np.ndarray, condition: Condition, seed: int) -> tuple[np.ndarray, int]:
    """16 kHz ``samples`` as ``condition``'s channel delivers them, and that channel's rate."""
    if condition.snr_db is not None:
        samples = noisy(samples, condition.snr_db, seed)
    if condition.channel == "phone":
        return phone_line(samples), TWILIO_SAMPLE_RATE
    return samples, RATE


async def play(clip: TurnClip, engine, config: BriskConfig, checks: dict, condition: Condition = WEB,
               seed: int = 0) -> dict[str, tuple[list[float], list[str]]]:
    """Play ``clip`` through ``condition``'s channel into VAD, STT and every policy; each policy's
    turn ends (stream seconds) and what each asked. ``seed``: the noise's, if the condition has one."""
    samples, rate = channel_audio(clip.samples, condition, seed)
    branches = {policy: _branch(policy, config, checks) for policy in POLICIES}
    stt = StreamingWhisperSTTService(engine=engine, scheduler=WhisperScheduler(engine),
                                     partial_interval_s=config.stt_partial_interval_secs,
                                     max_utterance_s=config.stt_max_utterance_secs,
                                     preroll_s=config.stt_preroll_secs)
    vad = VADProcessor(vad_analyzer=make_vad(config))
    started: list[float] = []

    async def feed(worker):
        step = round(FRAME_S * rate)
        t0 = time.monotonic()
        started.append(t0)
        for i, offset in enumerate(range(0, len(samples), step)):
            await asyncio.sleep(max(0.0, t0 + i * FRAME_S - time.monotonic()))
            chunk = samples[offset: offset + step].tobytes()
            await worker.queue_frame(InputAudioRawFrame(audio=chunk, sample_rate=rate, num_channels=1))
        await worker.queue_frame(EndFrame())

    await feed_pipeline([vad, stt, ParallelPipeline(*(b[0] for b in branches.values()))], feed, sample_rate=rate)
    return {policy: ([t - started[0] for t in ends.times], ends.asked) for policy, (_, ends) in branches.items()}


def judge(clip: TurnClip, ends_s: list[float], asked: list[str] | None = None) -> dict:
    """One policy on one clip: its turn ends relative to the true end, cut off or not, the delay."""
    relative = [round((t - clip.speech_end_s) * 1000) for t in ends_s]
    early = [ms for ms in relative if ms < 0]
    late = [ms for ms in relative if ms >= 0]
    judged = {"turn_ends_ms": relative, "cut_off": bool(early), "eot_ms": late[0] if late else None}
    return {**judged, "asked": asked} if asked is not None else judged


def summarize(rows: list[dict]) -> dict:
    summary = {}
    for policy in POLICIES:
        paused = [r[policy] for r in rows if r["kind"] == "paused"]
        complete = [r[policy] for r in rows if r["kind"] == "complete"]
        summary[policy] = {
            "false_cutoffs_paused": sum(j["cut_off"] for j in paused),
            "false_cutoff_rate_paused": round(sum(j["cut_off"] for j in paused) / len(paused), 3) if paused else None,
            "false_cutoffs_complete": sum(j["cut_off"] for j in complete),
            "eot_ms_complete": percentiles([j["eot_ms"] for j in complete if not j["cut_off"]]),
            "eot_ms_paused": percentiles([j["eot_ms"] for j in paused]),
            "no_turn_end": sum(j["eot_ms"] is None for j in paused + complete),
        }
    return summary


async def run_turns(turns: int | None = None, log=print, only: list[str] | None = None,
                    conditions: list[Condition] | None = None) -> dict:
    """Play the corpus (or its first ``turns`` utterances, or the ``only`` ids) once per condition
    (``conditions``; default web alone), the conditions taking turns utterance by utterance so load
    drifts hit them all; every policy on the same audio."""
    conditions = conditions or [WEB]
    from agent.business.facts import vocabulary_of
    from agent.runtime.models import whisper_model_path
    from processors.stt.whisper_engine import WhisperEngine

    config = load_config()
    vocabulary = vocabulary_of(config.business_definition) if config.stt_vocabulary else None
    engine = WhisperEngine.load(str(whisper_model_path(config.whisper_model)),
                                cpu_threads=config.whisper_threads, vocabulary=vocabulary)
    before = psutil.Process().memory_info().rss
    livekit = LiveKitEotCheck(threshold=config.turn_audio_check_threshold)
    audio_model = await measure_audio_model(livekit, before)
    checks = {"smart_turn": SmartTurnCheck(threshold=config.turn_audio_check_threshold), "livekit_eot": livekit}
    corpus = [u for u in TURNS_CORPUS + NEURAL_TURNS if only is None or u.id in only]
    neural = NeuralVoice() if any(u.voice == "hibari" for u in corpus) else None
    if turns is not None:
        # Both kinds even when cut short: alternate complete and paused.
        complete = [u for u in corpus if u.kind == "complete"]
        paused = [u for u in corpus if u.kind == "paused"]
        corpus = [u for pair in zip(complete, paused) for u in pair][:turns]
    rows = []
    for i, utterance in enumerate(corpus, 1):
        clip = render_turn(utterance, neural)
        for condition in conditions:
            ends = await play(clip, engine, config, checks, condition, seed=i)
            row = {"id": utterance.id, "condition": condition.name, "kind": utterance.kind, "voice": utterance.voice,
                   "text": utterance.text, "speech_end_s": round(clip.speech_end_s, 3),
                   "pauses_s": [[round(a, 3), round(b, 3)] for a, b in clip.pauses], "cut": clip.cut,
                   **{policy: judge(clip, *ends[policy]) for policy in POLICIES}}
            rows.append(row)
            log(f"[{i}/{len(corpus)}] {utterance.id} ({condition.name}): " + ", ".join(
                f"{p} {'CUT ' if row[p]['cut_off'] else ''}{fmt(row[p]['eot_ms'])} ms" for p in POLICIES))
    by_condition = {c.name: [r for r in rows if r["condition"] == c.name] for c in conditions}
    first = by_condition[conditions[0].name]
    return {
        "method": __doc__.split("\n\n")[2].replace("\n", " "),
        "config": {"vad_stop_secs": config.vad_stop_secs, "turn_stop_timeout_secs": config.turn_stop_timeout_secs,
                   "turn_unfinished_wait_secs": config.turn_unfinished_wait_secs,
                   "turn_audio_check": config.turn_audio_check, "turn_audio_model": config.turn_audio_model,
                   "turn_audio_check_threshold": config.turn_audio_check_threshold, "whisper_model": config.whisper_model,
                   "utterances": len(first), "paused": sum(r["kind"] == "paused" for r in first),
                   "conditions": list(by_condition)},
        "audio_model": audio_model,
        **_summaries(first),
        "conditions": {name: _summaries(of) for name, of in by_condition.items()},
        "utterances": rows,
    }


def _summaries(rows: list[dict]) -> dict:
    """Every policy over ``rows``, and per voice family."""
    return {"policies": summarize(rows),
            "voices": {family: summarize([r for r in rows if _family(r["voice"]) == family])
                       for family in ("espeak", "natural") if any(_family(r["voice"]) == family for r in rows)}}


async def measure_audio_model(check: LiveKitEotCheck, rss_before: int) -> dict:
    """What LiveKit's end-of-turn model costs a call: its memory (``rss_before``: the process's RSS
    before it was made), one prediction's time, and the wall time of three calls pausing at once."""
    clip = render_turn(TURNS_CORPUS[0])
    audio = clip.samples[: round((clip.speech_end_s + 0.3) * RATE)]
    await check.probability(audio, RATE)  # the first one sets the session up
    mb = (psutil.Process().memory_info().rss - rss_before) / 2**20
    one, three = [], []
    for _ in range(10):
        started = time.perf_counter()
        await check.probability(audio, RATE)
        one.append((time.perf_counter() - started) * 1000)
    for _ in range(10):
        started = time.perf_counter()
        await asyncio.gather(*(check.probability(audio, RATE) for _ in range(3)))
        three.append((time.perf_counter() - started) * 1000)
    return {"model": check.name, "mb": round(mb), "ms_one": percentiles(one), "ms_three_at_once": percentiles(three)}


def _family(voice: str) -> str:
    """espeak's synthetic voices, or a person's prosody (the neural voice, the recording)."""
    return "natural" if voice in ("hibari", "arctic") else "espeak"


def format_turns(result: dict) -> str:
    c = result["config"]
    lines = [
        f"End of turn: {c['utterances']} utterances ({c['paused']} with a pause mid-sentence), "
        f"same audio, VAD and transcripts for every policy"]
    if model := result.get("audio_model"):
        lines.append(f"audio model {model['model']}: {model['mb']} MB; one prediction P50 {fmt(model['ms_one']['p50'])} ms, "
                     f"three calls' at once {fmt(model['ms_three_at_once']['p50'])} ms (wall), off the event loop")
    conditions = result.get("conditions") or {"web": result}
    for name, summaries in conditions.items():
        where = f" ({name})" if len(conditions) > 1 else ""
        lines += _table(f"all voices{where}", summaries["policies"])
        for family, policies in summaries.get("voices", {}).items():
            lines += _table(f"{family} voices{where}", policies)
    return "\n".join(lines)


def _table(title: str, policies: dict) -> list[str]:
    # A long title (a condition's name with it) goes on a line of its own, above the columns.
    head = [title, ""] if len(title) >= 16 else [title]
    lines = head[:-1] + [f"{head[-1]:<16}{'cut-offs (paused)':>19}{'cut-offs (complete)':>21}{'EOT P50':>9}{'EOT P95':>9}"]
    for policy, s in policies.items():
        rate = s["false_cutoff_rate_paused"]
        lines.append(
            f"{policy:<16}{str(s['false_cutoffs_paused']) + (f' ({rate:.0%})' if rate is not None else ''):>19}"
            f"{s['false_cutoffs_complete']:>21}{fmt(s['eot_ms_complete']['p50']):>9}{fmt(s['eot_ms_complete']['p95']):>9}"
        )
    return lines

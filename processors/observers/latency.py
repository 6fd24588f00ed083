"""Latency observer: per-processor frame latency and a per-turn latency waterfall.

Consumes: the frame events pipecat reports to observers, ``on_process_frame`` (a frame enters a
processor) and ``on_push_frame`` (a processor pushes a frame), with their pipeline-clock
nanosecond timestamps. Emits: no frames; one ``turn-latency {json}`` log line per user turn, the
same record to the turn listeners, ``processor_stats()`` and ``summary()``.
Measures: how long each processor holds the frames it is given (P50/P95/P99 over a bounded
window), and for every user turn when each stage first happened, from the end of the user's
speech to the first bot audio leaving the output transport.
"""

import inspect
import json
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

from loguru import logger

from pipecat.observers.base_observer import BaseObserver, FrameProcessed, FramePushed
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from frames.turn import FAST_PATH, UserTurnContinuedFrame
from processors.observers import frame_kinds as kinds
from processors.observers.latency_turn import OpenTurn

STAGES = (
    "speech_end",
    "vad_stop",
    "stt_final",
    "turn_end",
    "llm_request",
    "llm_first_token",
    "tts_first_text",
    "tts_first_audio",
    "first_audio_out",
)

TurnListener = Callable[[dict], Awaitable[None] | None]

# What a frame class is, worked out once per class so the per-frame path is one dict lookup.
# Frames that pass through a processor are remembered until they leave it; a processor that
# swallows or re-chunks frames (the output transport) would otherwise grow this without end.
_MAX_HELD_FRAMES = 256
# A waiting cause older than this is not what an output answers (a frame swallowed long ago).
_DEFAULT_MAX_CAUSE_AGE_S = 30.0


def _percentile(ordered: list[int], q: float) -> int:
    # Nearest rank: always an observed value, and monotonic in q.
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class _ProcessorTrack:
    """What one processor is holding, and the latencies measured for it."""

    __slots__ = ("name", "role", "held", "cause_id", "cause_ns", "weak_id", "weak_ns", "samples")

    def __init__(self, name: str, role: int, window: int):
        self.name = name
        self.role = role
        self.held: OrderedDict[int, int] = OrderedDict()  # payload frame id -> entry time
        self.cause_id: int | None = None  # most recent payload frame that entered downstream
        self.cause_ns = 0
        self.weak_id: int | None = None  # most recent noise frame that entered downstream
        self.weak_ns = 0
        self.samples: deque[int] = deque(maxlen=window)  # nanoseconds


class LatencyObserver(BaseObserver):
    """Per-processor latency percentiles and a per-turn latency waterfall.

    **Per processor.** A sample is the time from a frame entering a processor
    (``on_process_frame``) to the frame it caused leaving it (``on_push_frame``):

    - Only payload frames are sampled: frames that are neither ``SystemFrame`` nor
      ``ControlFrame`` (text, output audio, LLM context...). Input audio, VAD/speaking
      signals, metrics and heartbeats flow through every processor dozens of times a
      second and would drown the window.
    - A payload frame that leaves the processor it entered (same frame id) is its own
      cause: the sample is how long the processor held it.
    - A new payload frame pushed downstream is caused by the most recent payload frame that
      entered the processor downstream and has not caused anything yet, so an LLM's first
      ``LLMTextFrame`` is measured from the ``LLMContextFrame`` and a TTS service's first
      audio from the text that completed the sentence. Only when no payload frame is waiting
      does the most recent noise frame (input audio, system, control, heartbeat) that entered
      downstream and was not passed on count as the cause. A sampled output answers every
      cause waiting at that moment, so only the first frame of a stream is sampled: the rest
      is generation time, not latency. A cause older than ``max_cause_age_s`` is dropped.
    - A TTS service (``isinstance(processor, TTSService)``) counts only its output audio as
      caused frames: it announces the sentence text before synthesising it, and that
      announcement is not what a listener waits for.

    Pipelines and their internal source and sink are containers, not work, and are not
    measured. Each processor keeps the last ``window`` samples; ``processor_stats()`` reports
    them.

    A sample starts when the processor takes the frame off its input queue (that is when
    pipecat reports ``on_process_frame``), so time a frame waits behind a busy processor is
    not charged to any processor; the per-turn waterfall below still contains it.

    Overhead: every frame event costs two dict lookups (frame class and processor are
    classified once and cached), a few integer comparisons and at most one ``OrderedDict``
    insert/pop and one ``deque.append``: O(1), no logging, no allocation beyond that dict
    entry. Measured here at 0.3-0.4 us per event, about 0.04% of a core at the ~1000
    events/s of a call (50 audio frames/s, each entering and leaving ~10 processors). The
    observer asks for every push (``observe_every_push=True``), because a processor's output
    is only visible on its own hop; pipecat queues each event to the observer's own task,
    which costs more than the observer itself, but none of it runs inside a processor.

    **Per turn.** A turn opens at ``VADUserStartedSpeakingFrame`` or
    ``UserStartedSpeakingFrame`` and closes when the output transport pushes
    ``BotStoppedSpeakingFrame`` after the turn's first audio and after the LLM's
    ``LLMFullResponseEndFrame`` (a stop while the answer is still streaming is a gap in it;
    when the answer ends with nothing more to say, the turn closes at that stop), when the
    next turn starts, or when the pipeline ends (the last two give ``"interrupted": true``;
    a turn without ``first_audio_out`` went unanswered). Each stage is the first occurrence
    in the turn of:

    - ``vad_stop``: ``VADUserStoppedSpeakingFrame`` pushed by anyone;
    - ``stt_final``: ``TranscriptionFrame`` pushed by an ``STTService``;
    - ``turn_end``: ``UserStoppedSpeakingFrame`` pushed by anyone;
    - ``llm_request``: ``LLMContextFrame`` entering an ``LLMService`` (a speculative request
      counts, unless an ``EagerEndOfTurnCancelFrame`` withdraws it);
    - ``llm_first_token``: ``LLMTextFrame`` pushed by an ``LLMService`` after the request;
    - ``tts_first_text``: a text frame entering a ``TTSService``;
    - ``tts_first_audio``: ``TTSAudioRawFrame`` pushed by a ``TTSService``;
    - ``first_audio_out``: ``BotStartedSpeakingFrame`` pushed by the ``BaseOutputTransport``.

    Only downstream events count, and a stage is tied to the processor that makes it, so a
    frame seen once per hop is counted once; the frames that open and close turns are also
    deduplicated by frame id. Bot output seen before the turn's VAD stop, user turn end or
    LLM request is left out: it is the tail of the response the user just interrupted (for
    the same reason a first token needs the turn's request, and TTS audio its TTS text).
    When the user resumes speaking (a new ``VADUserStartedSpeakingFrame``) before the turn
    ended and before any bot audio, the stages measured so far are dropped and measured
    again: the earlier VAD stop was a pause, not the end of speech. ``user_text`` keeps every
    final transcript of the turn; ``bot_text`` joins the response's LLM text and ``TTSSpeakFrame``s.

    The reference (0 ms) is the true end of speech when :meth:`mark_speech_end` gave one for
    the turn (``"reference": "speech_end"``), otherwise the VAD stop minus the VAD's
    ``stop_secs`` (``"vad_estimate"``); with neither, ``reference``, ``t0_monotonic`` and
    every stage are None. A closed turn's record, logged (DEBUG) as one ``turn-latency {json}`` line,
    appended to ``turns`` and passed to every turn listener::

        {"turn": 1, "user_text": str, "bot_text": str,
         "reference": "speech_end" | "vad_estimate" | None, "interrupted": bool,
         "speculative": bool,  # the answered LLM request was a speculative one
         "fast_path": str | None,  # the intent, when answered from the business's facts
         "merged": bool,  # it continued the turn before, which was cut: its answer answers both
         "speculations_withdrawn": int,  # speculative requests withdrawn before the answer
         "stages_ms": {stage: ms after the reference or None, for every stage in STAGES},
         "t0_monotonic": float | None}  # the reference, in time.monotonic() seconds

    **Times.** Everything is taken from the event timestamps (pipeline clock, ns), not from
    when the callback runs, which can lag behind the pipeline. They are converted to
    ``time.monotonic()`` seconds with the offset between the pipeline clock and
    ``time.monotonic_ns()``, read once (pipecat's ``SystemClock`` is ``monotonic_ns()`` minus
    its start time, so the offset is exact). ``t0_monotonic`` and :meth:`mark_speech_end`
    use that timescale, so other code can compare them with its own ``time.monotonic()``.
    """

    def __init__(
        self,
        *,
        window: int = 2000,
        max_cause_age_s: float = _DEFAULT_MAX_CAUSE_AGE_S,
        **kwargs,
    ):
        """Create the observer.

        Args:
            window: Samples kept per processor for the percentiles.
            max_cause_age_s: A frame that entered a processor longer ago than this is not
                taken as the cause of what the processor pushes now.
            **kwargs: Passed to ``BaseObserver``.
        """
        super().__init__(observe_every_push=True, **kwargs)
        self._window = window
        self._max_cause_age_ns = int(max_cause_age_s * 1e9)
        self._kinds: dict[type, int] = {}
        self._tracks: dict[int, _ProcessorTrack] = {}
        self._offset_ns: int | None = None
        self._turn: OpenTurn | None = None
        self._turn_count = 0
        self._handled_ids: OrderedDict[int, None] = OrderedDict()
        self._speech_end_marks: deque[float] = deque(maxlen=32)
        self._listeners: list[TurnListener] = []
        self.turns: list[dict] = []
        # Whose text is the bot's words: the LLM's, or, in a call whose answers are checked, what
        # the answer check let go (known from its first frame, the pipeline's StartFrame).
        self._text_role = kinds.LLM

    # -- public API --------------------------------------------------------------------------

    def add_turn_listener(self, listener: TurnListener):
        """Call ``listener(record)`` (sync or async) with every closed turn's record."""
        self._listeners.append(listener)

    def mark_speech_end(self, t_monotonic: float | None = None):
        """Report the true end of the user's speech, in ``time.monotonic()`` seconds.

        It becomes the reference of the turn it falls in (the latest mark between the turn's
        start and its close wins), so it may arrive before or after the observer has seen the
        turn's frames, as long as it arrives before the turn closes.

        Args:
            t_monotonic: When speech ended; now when omitted.
        """
        self._speech_end_marks.append(time.monotonic() if t_monotonic is None else t_monotonic)

    def processor_stats(self) -> dict[str, dict[str, Any]]:
        """P50/P95/P99 (ms) and sample count per processor that has samples."""
        stats = {}
        for track in self._tracks.values():
            if not track.samples:
                continue
            ordered = sorted(track.samples)
            stats[track.name] = {
                "p50_ms": round(_percentile(ordered, 50) / 1e6, 3),
                "p95_ms": round(_percentile(ordered, 95) / 1e6, 3),
                "p99_ms": round(_percentile(ordered, 99) / 1e6, 3),
                "count": len(ordered),
            }
        return stats

    def processor_samples(self) -> dict[str, list[float]]:
        """Each processor's samples in the window, in seconds (what the percentiles are taken from)."""
        return {t.name: [s / 1e9 for s in t.samples] for t in self._tracks.values() if t.samples}

    @property
    def answering(self) -> bool:
        """The open turn's answer is still on its way or being spoken (its turn closes after it)."""
        turn = self._turn
        return turn is not None and (turn.answer_due or "first_audio_out" in turn.stages)

    def summary(self) -> dict[str, Any]:
        """``{"processors": processor_stats(), "turns": [closed turn records]}``."""
        return {"processors": self.processor_stats(), "turns": list(self.turns)}

    # -- observer callbacks ------------------------------------------------------------------

    def _kind_of(self, frame) -> int:
        """The frame class's kind bits, computed once per class (this runs for every frame)."""
        kind = self._kinds.get(frame.__class__)
        if kind is None:
            kind = self._kinds[frame.__class__] = kinds.frame_kind(frame.__class__)
        return kind

    async def on_process_frame(self, data: FrameProcessed):
        """Note a frame entering a processor."""
        ts = data.timestamp
        if not ts:
            return  # the pipeline clock has not started
        frame = data.frame
        kind = self._kind_of(frame)
        processor = data.processor
        track = self._tracks.get(processor.id) or self._new_track(processor)
        downstream = data.direction is FrameDirection.DOWNSTREAM

        if track.role != kinds.PLUMBING:
            if kind & kinds.PAYLOAD:
                held = track.held
                held[frame.id] = ts
                if len(held) > _MAX_HELD_FRAMES:
                    held.popitem(last=False)
                if downstream:
                    track.cause_id = frame.id
                    track.cause_ns = ts
            elif downstream:
                track.weak_id = frame.id
                track.weak_ns = ts

        if downstream and kind & kinds.ENTER_KINDS and track.role:
            await self._on_turn_frame_entered(frame, kind, track.role, ts)

    async def on_push_frame(self, data: FramePushed):
        """Note a frame leaving a processor, and sample what it answers."""
        ts = data.timestamp
        if not ts:
            return
        frame = data.frame
        kind = self._kind_of(frame)
        source = data.source
        track = self._tracks.get(source.id) or self._new_track(source)
        downstream = data.direction is FrameDirection.DOWNSTREAM

        if track.role != kinds.PLUMBING:
            if kind & kinds.PAYLOAD:
                entered = track.held.pop(frame.id, None)
                if entered is not None:
                    track.samples.append(ts - entered)
                    if track.cause_id == frame.id:
                        track.cause_id = None
                elif downstream and (track.role != kinds.TTS or kind & kinds.AUDIO_OUT):
                    self._sample_caused(track, ts)
            elif frame.id == track.weak_id:
                track.weak_id = None  # passed through: not the cause of anything here

        if downstream and kind & kinds.PUSH_KINDS:
            await self._on_turn_frame_pushed(frame, kind, track.role, ts, source)
        elif downstream and isinstance(frame, UserTurnContinuedFrame) and self._turn is not None:
            self._turn.merged = True

    def _sample_caused(self, track: _ProcessorTrack, ts: int):
        if track.cause_id is not None:
            cause_ns = track.cause_ns
        elif track.weak_id is not None:
            cause_ns = track.weak_ns
        else:
            return
        # One output answers everything waiting: the rest of its stream is generation time.
        track.cause_id = track.weak_id = None
        if ts - cause_ns <= self._max_cause_age_ns:
            track.samples.append(ts - cause_ns)

    # -- turns -------------------------------------------------------------------------------

    async def _on_turn_frame_entered(self, frame, kind: int, role: int, ts: int):
        turn = self._turn
        if turn is None:
            return
        if role == kinds.LLM:
            if kind & kinds.CONTEXT and "llm_request" not in turn.stages:
                turn.mark("llm_request", ts)
                turn.speculative = bool(frame.speculation)
            elif kind & kinds.EAGER_CANCEL and turn.speculative:
                # The draft is withdrawn, unheard; the request that follows is the one answered.
                for stage in ("llm_request", "llm_first_token"):
                    turn.stages.pop(stage, None)
                turn.bot_text.clear()
                turn.speculative, turn.withdrawn = False, turn.withdrawn + 1
        elif role == kinds.TTS and kind & (kinds.TTS_TEXT_IN | kinds.TTS_SPEAK) and turn.responding:
            turn.mark("tts_first_text", ts)
            # Spaced on both sides: LLM text after it (a tool's answer after its filler) starts bare.
            turn.bot_text += [f" {frame.text} "] if kind & kinds.TTS_SPEAK else []

    async def _on_turn_frame_pushed(self, frame, kind: int, role: int, ts: int, source):
        if kind & kinds.BOUNDARY_KINDS:
            if self._already_handled(frame):
                return
            if self._offset_ns is None:
                self._offset_ns = time.monotonic_ns() - source.get_clock().get_time()

        if kind & (kinds.VAD_START | kinds.USER_START):
            await self._on_user_started(kind, ts)
            return
        if kind & kinds.PIPELINE_END:
            if self._turn is not None:
                await self._close_turn(ts, interrupted=True)
            return

        turn = self._turn
        if turn is None:
            return
        if kind & kinds.VAD_STOP:
            if "vad_stop" not in turn.stages:
                turn.mark("vad_stop", ts)
                turn.stop_secs = frame.stop_secs
        elif kind & kinds.TRANSCRIPT:
            if role == kinds.STT:
                turn.mark("stt_final", ts)
                if frame.text:
                    turn.user_text.append(frame.text.strip())
        elif kind & kinds.USER_STOP:
            turn.mark("turn_end", ts)
        elif kind & kinds.LLM_TEXT:
            if role == kinds.LLM and "llm_request" in turn.stages:
                turn.mark("llm_first_token", ts)
            # The fast path's and the tools' words pass the check untouched: they are taken where
            # the LLM pushes them, before a hand-over's EndFrame can close the turn behind them.
            if role != (kinds.LLM if FAST_PATH in frame.metadata else self._text_role):
                return
            if "llm_request" in turn.stages:
                turn.bot_text.append(frame.text)
            elif FAST_PATH in frame.metadata and turn.responding:
                # Answered from the business's facts: no request, no first token, same answer.
                turn.fast_path = frame.metadata[FAST_PATH]
                # A whole answer, not a token: a tool's reply after the fast path's own words
                # ("... for that." then "Order 4 5 7 2 ...") is a sentence of its own.
                turn.bot_text.append(f" {frame.text} ")
            else:
                return
            turn.said_since_pause |= turn.paused_ns is not None and any(c.isalnum() for c in frame.text)
        elif kind & (kinds.LLM_START | kinds.LLM_END):
            if role == kinds.LLM and turn.responding:
                turn.llm_open = bool(kind & kinds.LLM_START)
                if turn.ended_at_pause:
                    # The bot's last stop was the end of the answer: nothing speakable came after.
                    await self._close_turn(turn.paused_ns, interrupted=False)
        elif kind & kinds.TOOL_START:
            if role == kinds.LLM and turn.responding:
                turn.tools_open += len(frame.function_calls)
        elif kind & kinds.TOOL_END:
            # An intermediate result (is_final False) leaves the call running; a cancel has no properties.
            properties = getattr(frame, "properties", None)
            if role == kinds.LLM and turn.tools_open and (properties is None or properties.is_final):
                turn.tools_open -= 1
        elif kind & kinds.TTS_AUDIO:
            if role == kinds.TTS and "tts_first_text" in turn.stages:
                turn.mark("tts_first_audio", ts)
        elif kind & kinds.BOT_START:
            if role == kinds.OUTPUT and turn.responding:
                turn.mark("first_audio_out", ts)
                turn.paused_ns = None
        elif kind & kinds.BOT_STOP:
            if role == kinds.OUTPUT and "first_audio_out" in turn.stages:
                if turn.answer_due:
                    # A slow decode or a slow tool (after its filler) let the audio run dry: a gap
                    # in the answer, not its end.
                    turn.paused_ns, turn.said_since_pause = ts, False
                else:
                    await self._close_turn(ts, interrupted=False)

    async def _on_user_started(self, kind: int, ts: int):
        turn = self._turn
        if turn is not None and turn.ended_at_pause:
            # A tool's result that nothing was said after: the answer had ended at the pause.
            await self._close_turn(turn.paused_ns, interrupted=False)
            turn = None
        if turn is not None and not turn.user_done:
            if kind & kinds.VAD_START:
                # The user resumed: what was measured ended a pause, not the turn. A draft still
                # in flight may yet be the answer (if not, it is withdrawn: EAGER_CANCEL).
                draft = ("llm_request", "llm_first_token") if turn.speculative else ()
                turn.stages = {s: ts for s, ts in turn.stages.items() if s in draft}
                if not turn.stages:
                    turn.bot_text.clear()
                    turn.speculative = False
            return
        if turn is not None:
            await self._close_turn(ts, interrupted=True)
        self._turn_count += 1
        self._turn = OpenTurn(self._turn_count, ts)

    def _already_handled(self, frame) -> bool:
        if frame.id in self._handled_ids:
            return True
        self._handled_ids[frame.id] = None
        if len(self._handled_ids) > 64:
            self._handled_ids.popitem(last=False)
        return False

    async def _close_turn(self, close_ns: int, *, interrupted: bool):
        turn = self._turn
        self._turn = None
        if turn is None:
            return
        record = self._build_record(turn, close_ns, interrupted)
        self.turns.append(record)
        logger.debug("turn-latency " + json.dumps(record))  # DEBUG: it holds what was said
        for listener in self._listeners:
            try:
                result = listener(record)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception(f"{self}: turn listener {listener!r} failed")

    def _build_record(self, turn: OpenTurn, close_ns: int, interrupted: bool) -> dict:
        offset = self._offset_ns or 0
        ref_ns = None
        reference = None
        mark = self._take_speech_end_mark(
            (turn.start_ns + offset) / 1e9, (close_ns + offset) / 1e9
        )
        if mark is not None:
            ref_ns = round(mark * 1e9) - offset
            reference = "speech_end"
        elif "vad_stop" in turn.stages:
            ref_ns = turn.stages["vad_stop"] - round(turn.stop_secs * 1e9)
            reference = "vad_estimate"

        stages_ms: dict[str, float | None] = {}
        for stage in STAGES:
            ts = ref_ns if stage == "speech_end" else turn.stages.get(stage)
            stages_ms[stage] = None if ref_ns is None or ts is None else round((ts - ref_ns) / 1e6, 1)
        return {
            "turn": turn.n,
            "user_text": " ".join(t for t in turn.user_text if t),
            "bot_text": " ".join("".join(turn.bot_text).split()),
            "fast_path": turn.fast_path,
            "merged": turn.merged,
            "reference": reference,
            "interrupted": interrupted,
            "speculative": turn.speculative,
            "speculations_withdrawn": turn.withdrawn,
            "stages_ms": stages_ms,
            "t0_monotonic": None if ref_ns is None else (ref_ns + offset) / 1e9,
        }

    def _take_speech_end_mark(self, start: float, close: float) -> float | None:
        chosen = None
        for mark in self._speech_end_marks:
            if start <= mark <= close and (chosen is None or mark > chosen):
                chosen = mark
        # Marks up to the close belong to this turn or an earlier one: none is needed again.
        kept = [m for m in self._speech_end_marks if m > close]
        self._speech_end_marks.clear()
        self._speech_end_marks.extend(kept)
        return chosen

    def _new_track(self, processor: FrameProcessor) -> _ProcessorTrack:
        track = _ProcessorTrack(processor.name, kinds.processor_role(processor), self._window)
        self._tracks[processor.id] = track
        if track.role == kinds.CHECK:
            self._text_role = kinds.CHECK
        return track

"""Streaming Whisper STT: partial transcripts while the user speaks, one final per utterance.

Consumes ``InputAudioRawFrame`` at any sample rate and the ``VADUserStartedSpeakingFrame`` /
``VADUserStoppedSpeakingFrame`` pushed by pipecat's ``VADProcessor`` upstream. All input frames
pass through. Audio is kept at its input rate and each transcription's clip is resampled to
Whisper's 16 kHz in one shot (soxr), so telephony audio at 8 kHz reaches a partial the moment it
arrives: a stream resampler held back 65 ms of it at the median, 111 ms at most
(``python -m agent.bench.phone``).

Emits ``PartialTranscriptionFrame`` every ``partial_interval_s`` while the user speaks (at most
one transcription in flight, always of the newest audio of the current utterance only), and one
``FinalTranscriptionFrame`` (``finalized=True``) per utterance after the VAD stop (a
``NoWordsHeardFrame`` when it has no words: a cough): a partial that already covered the end of
speech (or heard every sound, the rest being quiet) is promoted as is, otherwise the utterance is
transcribed once. A pause after finished words gets one partial, then none until sound comes
again: quiet adds no words, and the cores are wanted at the turn's end. No partial follows the
VAD stop, except one: while a final waits for its review (below), its words as first heard, so
the turn strategy drafts an answer on them meanwhile.

A final the scheduler ``doubts`` is heard again by its second opinion before it is pushed. With
``review_early``, that review starts on the first partial whose words repeat the one before, or
whose audio ends in the caller's pause after finished words (a pause brings that partial
forward, and the second opinion hears the pause at once, beside it: when a partial of the audio
before the pause is still running, the hearing does not wait for it, and the pause's partial,
or the final if the VAD stop comes first, settles with it; so does a repeat that partial
makes, and a review of words since gone on from stops for it), not after the VAD stop; no partial
after one that covers the speech end holds up the final. Later partials and the final with the
same words are reported as the review heard them, so the final is ready when the turn ends and
a draft made on the partials is made on the reviewed words. Words that change start it again.

Measures: pipecat STT TTFB (speech end -> final transcript, the ``STTService`` way) and, in
``partial_stats``, each partial job's duration and audio span plus how often finals were reused.
"""

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator

import numpy as np
import soxr
from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import STTSettings
from pipecat.services.stt_latency import DEFAULT_TTFS_P99
from pipecat.services.stt_service import STTService
from pipecat.transcriptions.language import Language
from pipecat.utils.time import time_now_iso8601

from frames.transcription import FinalTranscriptionFrame, NoWordsHeardFrame, PartialTranscriptionFrame
from processors.stt.partial_stats import PartialJob, PartialStats
from processors.stt.speech_energy import from_onset
from processors.turns.comparison_form import comparison_form
from processors.turns.turn_completeness import unfinished
from processors.stt.whisper_engine import SAMPLE_RATE, WhisperEngine, WhisperResult
from processors.stt.whisper_scheduler import WhisperScheduler
from processors.stt.whisper_utterance import EarlyReview, Partial, Utterance


# The preroll is cut to start this long before the first sound in it: a second of silence before
# the words makes tiny.en mishear some ("What time..." as "Well time..." at 8 kHz).
_LEAD_S = 0.3


class StreamingWhisperSTTService(STTService):
    """Whisper STT with partial transcripts while the user speaks (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: WhisperEngine,
        scheduler: WhisperScheduler | None = None,
        partial_interval_s: float = 0.2,
        preroll_s: float = 1.0,
        reuse_covering_partial: bool = True,
        max_utterance_s: float = 20.0,
        review_early: bool = True,
        **kwargs,
    ):
        """Initialize the service.

        Args:
            engine: The loaded model, shareable between services.
            scheduler: The process's Whisper scheduler, which every call's STT shares (finals
                first, one partial per call); a scheduler of its own when None.
            partial_interval_s: Time between partial transcriptions; a job that takes longer
                just delays the next one, which then takes the newest audio, and the interval
                stretches while other calls' jobs wait for the engine.
            preroll_s: Audio kept from before the VAD start, which fires only after
                ``start_secs`` of speech and hears a soft first word late (0.36-0.86 s after
                the first sound of the FAQ suite's questions): with 0.5 s a call lost the "Can"
                of "Can I pay with cash?". It is cut to start ``_LEAD_S`` before its first
                sound, and never reaches back past the utterance before (``_end_utterance``).
            reuse_covering_partial: Promote a partial that already covers the end of speech
                to the final instead of transcribing the utterance again.
            max_utterance_s: Speech without a VAD stop this long (a TV, hold music, a caller
                who never pauses) is transcribed as said so far, pushed as a final, and
                continued as a new utterance, so no clip grows without bound.
            review_early: Start a doubted final's review on the stable partial before it (see
                the module docstring).
            **kwargs: Passed to ``STTService``.
        """
        kwargs.setdefault("settings", STTSettings(model=engine.name, language=Language(engine.language)))
        # Finals arrive finalized, so turn strategies only fall back to this wait when an
        # utterance produced no text at all.
        kwargs.setdefault("ttfs_p99_latency", DEFAULT_TTFS_P99)
        super().__init__(**kwargs)
        self._engine = engine
        self._scheduler = scheduler or WhisperScheduler(engine)
        self._max_utterance_s = max_utterance_s
        self._partial_interval_s = partial_interval_s
        self._preroll_s = preroll_s
        self._preroll_bytes = 0  # set with the stream's rate, by the first frame
        self._reuse_covering_partial = reuse_covering_partial
        self._review_early = review_early
        self.partial_stats = PartialStats()

        # The stream's rate is the first frame's; _frame_rate is the frame being processed.
        self._stream_rate: int | None = None
        self._frame_rate = SAMPLE_RATE
        self._stream_samples = 0
        self._preroll = bytearray()
        self._utterance: Utterance | None = None
        self._utterance_count = 0
        self._partial_loop_task: asyncio.Task | None = None
        self._final_task: asyncio.Task | None = None

    def can_generate_metrics(self) -> bool:
        """STT TTFB is reported (speech end -> final transcript)."""
        return True

    async def stop(self, frame: EndFrame):
        """Let a final that is being transcribed reach the pipeline, then stop."""
        await self._abandon_open_utterance()
        if self._final_task is not None:
            await self._final_task
            self._final_task = None
        await super().stop(frame)

    async def cancel(self, frame: CancelFrame):
        """Stop at once, dropping any transcription in progress."""
        await self._abandon_open_utterance()
        if self._final_task is not None:
            await self.cancel_task(self._final_task)
            self._final_task = None
        await super().cancel(frame)

    async def process_audio_frame(self, frame: InputAudioRawFrame, direction: FrameDirection):
        """Note the frame's own sample rate: telephony audio may arrive at 8 kHz."""
        self._frame_rate = frame.sample_rate
        await super().process_audio_frame(frame, direction)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        """Append input audio to the stream; transcripts are pushed by background tasks."""
        rate = self._frame_rate
        if self._stream_rate is None:
            self._stream_rate = rate
            self._preroll_bytes = round(self._preroll_s * rate) * 2
        elif rate != self._stream_rate:
            # Transports send one rate per call; a stray frame at another one is converted
            # rather than dropped, so the stream clock stays whole.
            logger.warning(
                f"{self}: {rate} Hz audio in a {self._stream_rate} Hz stream; resampling it"
            )
            samples = np.frombuffer(audio, dtype=np.int16)
            audio = soxr.resample(samples, rate, self._stream_rate, quality="VHQ").tobytes()
        self._stream_samples += len(audio) // 2
        self._preroll += audio
        del self._preroll[: max(0, len(self._preroll) - self._preroll_bytes)]
        utterance = self._utterance
        if utterance is not None:
            utterance.append(audio)
            if utterance.seconds(utterance.end_sample - utterance.start_sample) > self._max_utterance_s:
                logger.warning(
                    f"{self}: utterance {utterance.id} passed {self._max_utterance_s:g} s without a pause; "
                    f"transcribing it as said so far and going on with a new one"
                )
                await self._end_utterance(0.0)
                self._begin_utterance(preroll=False)
        yield None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Start and end utterances on the VAD frames (after the base class handles them)."""
        await super().process_frame(frame, direction)
        if isinstance(frame, VADUserStartedSpeakingFrame):
            self._begin_utterance()
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            await self._end_utterance(frame.stop_secs)

    def _begin_utterance(self, preroll: bool = True):
        if self._utterance is not None:
            return
        self._utterance_count += 1
        rate = self._stream_rate or self._frame_rate
        kept = from_onset(bytes(self._preroll), rate, _LEAD_S) if preroll else b""
        start_sample = self._stream_samples - len(kept) // 2
        utterance = Utterance(self._utterance_count, start_sample, kept, rate)
        self._utterance = utterance
        self._partial_loop_task = self.create_task(
            self._partial_loop(utterance), name=f"partials-{utterance.id}"
        )

    async def _end_utterance(self, stop_secs: float):
        utterance = self._utterance
        if utterance is None:
            return
        self._utterance = None
        utterance.ended = True
        # The next utterance's preroll starts here: a caller who goes on after a short pause
        # must not have this utterance's last words transcribed twice.
        self._preroll.clear()
        await self._stop_partials()
        # The VAD fires stop_secs after the speech ended.
        speech_end = max(
            utterance.start_sample,
            self._stream_samples - round(stop_secs * utterance.sample_rate),
        )
        last = utterance.last_partial
        if (utterance.job is None and self._covers(utterance, last, speech_end)
                and (last.reviewed or not self._doubts(utterance, last))):
            utterance.drop_hearing()
            await self._push_final(utterance, utterance.last_partial, reused=True)
            return
        self._final_task = self.create_task(
            self._finalize(utterance, speech_end, self._final_task), name=f"final-{utterance.id}"
        )

    def _covers(self, utterance: Utterance, partial: Partial | None, speech_end: int) -> bool:
        """Whether ``partial`` heard all the speech: to the VAD's end of it, or every sound (``heard_all``)."""
        if not self._reuse_covering_partial or partial is None:
            return False
        return partial.end_sample >= speech_end or utterance.heard_all(partial)

    async def _stop_partials(self):
        if self._partial_loop_task is not None:
            # The loop only waits on the job; the job itself is left to _finalize.
            await self.cancel_task(self._partial_loop_task)
            self._partial_loop_task = None

    async def _abandon_open_utterance(self):
        # Without a VAD stop there is no end of speech to finalize at.
        await self._stop_partials()
        if self._utterance is not None:
            for task in (self._utterance.job, self._utterance.early and self._utterance.early.task):
                if task is not None:
                    await self.cancel_task(task)
            self._utterance.drop_hearing()
        self._utterance = None

    async def _partial_loop(self, utterance: Utterance):
        # The previous utterance's final must reach the pipeline before this one's partials.
        if self._final_task is not None:
            await asyncio.wait({self._final_task})
        next_tick = time.monotonic() + self._partial_interval_s
        while True:
            wait = next_tick - time.monotonic()
            if wait > 0 and not utterance.pause_heard.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(utterance.pause_heard.wait(), wait)
            utterance.pause_heard.clear()
            if utterance.end_sample == utterance.job_end_sample or utterance.nothing_new():
                next_tick += self._partial_interval_s
                continue
            started = time.monotonic()
            utterance.job_end_sample = utterance.end_sample
            audio, paused, hearing = utterance.samples(), utterance.paused, utterance.hearing
            utterance.hearing = None
            if paused and self._review_early and self._may_doubt(utterance):
                # Its review would wait for it: the second opinion hears the pause beside it
                # (or has since the pause was heard, while the partial before this one ran).
                hearing = hearing or self._hear_again(utterance, audio)
            elif hearing is not None:
                hearing.cancel()  # the partial it was heard beside says these words need none
                hearing = None
            utterance.job = self.create_task(
                self._run_partial(utterance, audio, utterance.job_end_sample, paused, hearing),
                name=f"partial-{utterance.id}",
            )
            await self._wait_for_job(utterance)
            elapsed = time.monotonic() - started
            # Ticks that fell during the job are dropped, never queued: the next job starts
            # now, on the newest audio; while other calls wait for the engine, later.
            self.partial_stats.skipped_ticks += int(elapsed / self._partial_interval_s)
            interval = self._partial_interval_s * (1 + self._scheduler.load)
            next_tick = max(started + interval, time.monotonic())

    def _hear_again(self, utterance: Utterance, audio: np.ndarray) -> asyncio.Task:
        """The second opinion's hearing of a pause; a review of words since gone on from stops for it."""
        if utterance.early is not None:
            utterance.early.task.cancel()
            utterance.early = None
        return self.create_task(self._scheduler.hear_again(audio, owner=self, early=True),
                                name=f"hearing-{utterance.id}")

    async def _wait_for_job(self, utterance: Utterance):
        """Wait for the partial in flight. A pause heard meanwhile is heard by the second opinion
        at once: its engine is idle, and waiting for a partial of the audio before the pause
        (~0.26 s on 2 cores) would put the turn's end that much later."""
        job = utterance.job
        # wait() rather than await: cancelling this loop must not cancel the job.
        if not utterance.pause_heard.is_set():
            pause = asyncio.ensure_future(utterance.pause_heard.wait())
            try:
                await asyncio.wait({job, pause}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                pause.cancel()
            last = utterance.last_partial
            # Only after finished words: a pause after "Where is my" is the caller thinking, and
            # a hearing of it would only take a core from tiny.en's partials.
            if (not job.done() and utterance.paused and utterance.hearing is None and last is not None
                    and unfinished(last.result.transcript) is None
                    and self._review_early and self._may_doubt(utterance)):
                utterance.hearing = self._hear_again(utterance, utterance.samples())
        await asyncio.wait({job})

    def _may_doubt(self, utterance: Utterance) -> bool:
        """Whether the next partial is likely to need a review: the last one does, or there was none."""
        last = utterance.last_partial
        return self._scheduler.second_opinion is not None and (last is None or self._review_to_begin(utterance, last))

    async def _run_partial(self, utterance: Utterance, audio: np.ndarray, end_sample: int, after_pause: bool,
                           hearing: asyncio.Task | None = None):
        """One partial; ``hearing``: the second opinion's of its audio, cancelled if not reviewed with."""
        try:
            await self._partial(utterance, audio, end_sample, after_pause, hearing)
        finally:
            if hearing is not None and (utterance.early is None or utterance.early.hearing is not hearing):
                hearing.cancel()

    async def _partial(self, utterance: Utterance, audio: np.ndarray, end_sample: int, after_pause: bool,
                       hearing: asyncio.Task | None):
        started = time.monotonic()
        try:
            result = await self._scheduler.transcribe(audio, owner=self, final=False)
        except Exception as e:
            await self.push_error(f"{self}: partial transcription failed: {e}", exception=e)
            return
        finally:
            utterance.job = None
        if result is None:
            return  # replaced by a newer partial, or stopped
        text = result.transcript
        self.partial_stats.jobs.append(
            PartialJob(
                utterance_id=utterance.id,
                audio_start_s=utterance.seconds(utterance.start_sample),
                audio_end_s=utterance.seconds(end_sample),
                duration_s=time.monotonic() - started,
                text=text,
            )
        )
        partial = Partial(end_sample, result, after_pause=after_pause)
        if self._review_early:
            partial = self._heard_again(utterance, partial, utterance.last_partial, audio, hearing)
        utterance.last_partial = partial
        # After the VAD stop the final follows, or _finalize pushes this while it is reviewed.
        if not utterance.ended:
            await self._push_partial(utterance, partial)

    async def _push_partial(self, utterance: Utterance, partial: Partial):
        if not partial.result.transcript:
            return
        await self.push_frame(
            PartialTranscriptionFrame(
                text=partial.result.transcript,
                user_id=self._user_id,
                timestamp=time_now_iso8601(),
                language=Language(self._engine.language),
                result=partial.result,
                utterance_id=utterance.id,
                audio_start_s=utterance.seconds(utterance.start_sample),
                audio_end_s=utterance.seconds(partial.end_sample),
            )
        )

    async def _finalize(
        self, utterance: Utterance, speech_end: int, previous_final: asyncio.Task | None
    ):
        if previous_final is not None:
            await asyncio.wait({previous_final})
        job = utterance.job
        if job is not None:
            # One that covers the speech end, unless the last partial already did and needs no
            # review not yet begun: the job only adds silence to it (its own review may be under way).
            if (self._reuse_covering_partial and utterance.job_end_sample >= speech_end
                    and not (self._covers(utterance, utterance.last_partial, speech_end)
                             and not self._review_to_begin(utterance, utterance.last_partial))):
                await asyncio.wait({job})
            else:
                # Its audio ends before the speech did, or only adds silence to a partial that
                # covers it: the final does not need it.
                await self.cancel_task(job)
                self.partial_stats.cancelled_jobs += 1
        end_sample = utterance.end_sample
        reused = self._covers(utterance, utterance.last_partial, speech_end)
        revised = False
        try:
            if reused:
                source = utterance.last_partial
            else:
                result = await self._scheduler.transcribe(utterance.samples(), owner=self, final=True)
                if result is None:
                    return
                source = Partial(end_sample, result)
            if not source.reviewed and self._doubts(utterance, source):
                if not self._review_done(utterance, source):
                    # The turn waits for the review (0.4-0.8 s of base on 2 cores): the words as
                    # first heard go on as a partial meanwhile, so an answer is drafted on them
                    # (held until the final confirms them) while the second opinion listens.
                    await self._push_partial(utterance, source)
                reviewed = await self._reviewed(utterance, source.result)
                if reviewed is not source.result:
                    source, reused, revised = Partial(end_sample, reviewed, reviewed=True), False, True
        except Exception as e:
            await self.push_error(f"{self}: final transcription failed: {e}", exception=e)
            return
        finally:
            utterance.drop_hearing()
        await self._push_final(utterance, source, reused=reused, revised=revised)

    def _review_done(self, utterance: Utterance, heard: Partial) -> bool:
        """Whether an early review of ``heard``'s words has already given its word."""
        early = utterance.early
        return (early is not None and early.words == comparison_form(heard.result.transcript)
                and early.result() is not None)

    def _review_to_begin(self, utterance: Utterance, heard: Partial) -> bool:
        """Whether ``heard`` needs a review that has not begun."""
        early = utterance.early
        begun = early is not None and early.words == comparison_form(heard.result.transcript)
        return not heard.reviewed and not begun and self._doubts(utterance, heard)

    def _doubts(self, utterance: Utterance, heard: Partial) -> bool:
        """Whether the scheduler's second opinion should hear these words, of this much audio."""
        seconds = (heard.end_sample - utterance.start_sample) / utterance.sample_rate
        return self._scheduler.doubts(heard.result, seconds, narrowband=utterance.sample_rate < SAMPLE_RATE)

    async def _reviewed(self, utterance: Utterance, first: WhisperResult) -> WhisperResult:
        """The second opinion's transcript to keep for ``first``: the early review's when it is
        of the same words, else a review of the whole utterance."""
        early = utterance.early
        if early is not None and early.words == comparison_form(first.transcript) and not early.task.cancelled():
            await asyncio.wait({early.task})
            kept = early.result()
            if kept is not None:
                return first if kept is early.first else kept
        if early is not None:
            await self.cancel_task(early.task)
        if utterance.hearing is not None:
            # The pause's hearing no partial took (the VAD stop came first): it heard every
            # sound of the utterance, since sound after the pause would have dropped it.
            hearing, utterance.hearing = utterance.hearing, None
            return self._scheduler.settle(first, await hearing)
        # Resampled only here: a final reused as is costs no second pass over its audio.
        return await self._scheduler.review(utterance.samples(), first, owner=self)

    def _heard_again(self, utterance: Utterance, partial: Partial, before: Partial | None,
                     audio: np.ndarray, hearing: asyncio.Task | None = None) -> Partial:
        """``partial`` as the early review heard its words; a review started when they repeat ``before``'s
        or end a pause (with ``hearing``, the second opinion's of its audio, when one is under way)."""
        words = comparison_form(partial.result.transcript)
        early = utterance.early
        if early is not None and early.words == words:
            kept = early.result()
            if kept is None:
                return partial
            return dataclasses.replace(partial, result=partial.result if kept is early.first else kept, reviewed=True)
        stable = before is not None and comparison_form(before.result.transcript) == words
        paused = partial.after_pause and unfinished(partial.result.transcript) is None
        if not words or not (stable or paused) or not self._doubts(utterance, partial):
            return partial
        if early is not None:
            early.task.cancel()  # of words the caller has since gone on from
        if hearing is None and utterance.hearing is not None:
            # A pause heard while this partial ran: since then the second opinion hears these words.
            hearing, utterance.hearing = utterance.hearing, None
        first = partial.result
        review = self._settled(hearing, first) if hearing else self._scheduler.review(audio, first, owner=self, early=True)
        task = self.create_task(review, name=f"early-review-{utterance.id}")
        utterance.early = EarlyReview(words, task, first, hearing)
        return partial

    async def _settled(self, hearing: asyncio.Task, first: WhisperResult) -> WhisperResult:
        return self._scheduler.settle(first, await hearing, early=True)

    async def _push_final(self, utterance: Utterance, source: Partial, *, reused: bool, revised: bool = False):
        if reused:
            self.partial_stats.reused_finals += 1
        else:
            self.partial_stats.transcribed_finals += 1
        text = source.result.transcript
        logger.debug(f"{self}: final [{text}] (utterance {utterance.id}, reused partial: {reused})")
        if not text:
            await self.push_frame(NoWordsHeardFrame(utterance_id=utterance.id))
            return
        await self.emit_stt_usage_metrics()
        await self.push_frame(
            FinalTranscriptionFrame(
                text=text,
                user_id=self._user_id,
                timestamp=time_now_iso8601(),
                language=Language(self._engine.language),
                result=source.result,
                finalized=True,
                utterance_id=utterance.id,
                audio_start_s=utterance.seconds(utterance.start_sample),
                audio_end_s=utterance.seconds(source.end_sample),
                reused_partial=reused,
                revised=revised,
            )
        )

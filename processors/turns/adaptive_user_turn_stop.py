"""The end of the caller's turn, decided on what was said: soon after a finished sentence, later
after an unfinished one.

Consumes (as a pipecat user turn stop strategy, inside ``LLMUserAggregator``): the caller's
``InputAudioRawFrame``s, VAD frames, the STT's final ``TranscriptionFrame``s and its
``NoWordsHeardFrame``s. Emits: the turn end, through pipecat's ``trigger_user_turn_stopped``.
Measures: ``held`` (turns whose end waited for more words), ``released_by_timeout`` (of those,
the ones that ended at the longest wait),
``held_by_audio`` (held because the audio model judged finished-looking words unfinished),
``waited_for_final`` (turns whose end waited for the final of the caller's latest words) and
``ended_without_words`` (turns whose sound the STT found no words in, ended at that final); one
log line per hold with the reason.

pipecat's ``SpeechTimeoutUserTurnStopStrategy`` ends the turn ``user_speech_timeout`` after the
VAD stop. This subclass keeps that for words that can end a turn; when they can't
(``turn_completeness.unfinished``: "My order number is", "two bikes for Saturday,", "um") it holds
the end until the caller speaks again (the base then discards the pending end, as it does for
any resumed speech), a later transcript of the turn is finished, or ``max_wait_s`` after the VAD
stop has passed. A statement the words call finished (not a question) is also put to
``audio_check`` (``livekit_eot_check.py`` or ``smart_turn_check.py``, started at the VAD stop so
it is ready by the timeout), and held the same way when the audio says unfinished. At the longest
wait, audio that is speech again (the caller resuming, before the VAD has said so) keeps the turn
open a moment longer.

A turn also never ends before the final transcript of the caller's latest words. pipecat's base
waits for *a* transcript, and for the STT only up to its P99 after the VAD stop: when a turn went
on after a pause, the first half's final is already there, and on a machine whose Whisper is
slower than that P99 the turn ended on the first half alone — "What time do you open on
Saturday?" answered while "Or on Sunday?" was still being transcribed. So once a partial with
words has come for an utterance (``PartialTranscriptionFrame.utterance_id``), its final is waited
for, up to ``final_wait_s`` after the VAD stop, or until the STT says it held no words.

A turn whose sound held no words at all (the STT's ``NoWordsHeardFrame``: a cough that started
it, or that cut the bot off because a partial heard a word in it) ends at that final, with
nothing said: pipecat's base would wait for a transcript until the aggregator's 5 s timeout.

Subclasses that settle something at the turn end (speculative drafts) override
``end_of_turn``, which runs only once the hold is over.

Once this strategy has ended a turn, nothing ends it again until pipecat starts the next one (or
the caller speaks again): pipecat tells the strategies of the end one after another, with awaits
between, and on a busy machine a transcript processed in that moment ended the turn a second
time, and a draft begun on it was withdrawn by the end itself, taking the committed answer with
it (``ended``).

With ``question_ends_at_final``, a finished question ("What time do you open on Saturday?")
whose final comes after the VAD stop ends the turn at that final instead of waiting out
``user_speech_timeout`` too: the VAD's own silence (0.3 s) already said the caller paused, and
Whisper ends words with a question mark when they ask something. The turns suite cut no more
utterances with it (docs/benchmarks.md, End of turn); a caller who goes on anyway is still heard as one
question (``processors/turns/turn_continuation.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque

import numpy as np
from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy

from frames.transcription import FinalTranscriptionFrame, NoWordsHeardFrame, PartialTranscriptionFrame
from processors.turns.silence_clock import SilenceClock
from processors.turns.turn_completeness import CompletenessRules, unfinished

# At the longest wait, speech in the audio keeps the turn open this much longer for the VAD to
# confirm it (its start needs 0.2 s of speech).
_RESUMING_GRACE_S = 0.5


class AdaptiveUserTurnStopStrategy(SpeechTimeoutUserTurnStopStrategy):
    """Speech-timeout end of turn that waits up to ``max_wait_s`` after the VAD stop for unfinished words."""

    def __init__(self, *, max_wait_s: float = 1.0, rules: CompletenessRules | None = None,
                 audio_check=None, final_wait_s: float = 3.0, question_ends_at_final: bool = False, **kwargs):
        """Create the strategy.

        Args:
            max_wait_s: Longest wait after the VAD stop for a turn whose words are unfinished;
                0 = never wait (the base's fixed timeout).
            final_wait_s: Longest wait after the VAD stop for the final transcript of words a
                partial already heard.
            rules: What counts as unfinished; ``CompletenessRules(open_ending=True)`` when None.
                ``open_ending`` applies only to words Brisk's Whisper STT wrote (its
                ``FinalTranscriptionFrame``): it punctuates the sentences it hears end. Another
                STT's transcript, the keypad's digits or a typed message may have no punctuation.
            audio_check: An audio end-of-turn model (``livekit_eot_check.py``, ``smart_turn_check.py``)
                for turns whose words look finished; None = words only.
            question_ends_at_final: A finished question ends the turn when its final comes
                after the VAD stop, without the rest of ``user_speech_timeout``.
            **kwargs: ``SpeechTimeoutUserTurnStopStrategy`` arguments (``user_speech_timeout``).
        """
        super().__init__(**kwargs)
        self.max_wait_s = max_wait_s
        self.rules = rules or CompletenessRules(open_ending=True)
        self._unpunctuated_rules = dataclasses.replace(self.rules, open_ending=False)
        self._words_punctuated = False  # the turn's latest words are Whisper's, which punctuates
        self.audio_check = audio_check
        self.held = 0
        self.held_by_audio = 0
        self.released_by_timeout = 0
        self.final_wait_s = final_wait_s
        self.waited_for_final = 0
        self.question_ends_at_final = question_ends_at_final
        self.ended_at_final = 0
        self.ended_without_words = 0
        self._in_turn = False
        self._ended = False
        self.silence = SilenceClock()
        self._finals: list[str] = []
        self._audio: deque[np.ndarray] = deque()
        self._audio_samples = 0
        self._sample_rate = 16000
        self._verdict: asyncio.Task | None = None
        self._vad_stop_at: float | None = None
        self._paused = False  # the VAD stopped and has not started again
        self._hold_task: asyncio.Task | None = None
        self._held_for_words = False  # else for the audio: a later transcript does not release it
        self._end_args: dict = {}
        # The STT numbers its utterances: the newest one a partial heard words in, and the newest
        # one whose final has come. Ids, not VAD order, because the VAD's system frames overtake
        # the transcripts queued behind them.
        self._worded_utterance = -1
        self._final_utterance = -1
        self._final_wait_task: asyncio.Task | None = None

    @property
    def holding(self) -> bool:
        return self._hold_task is not None

    @property
    def ended(self) -> bool:
        """This strategy ended the turn, and neither the next turn nor the caller's voice has started since."""
        return self._ended

    @property
    def final_awaited(self) -> bool:
        """A partial heard words of an utterance whose final has not come yet."""
        return self._worded_utterance > self._final_utterance

    async def handle_user_turn_started(self):
        self._in_turn = True
        self._ended = False
        await super().handle_user_turn_started()
        await self._cancel_hold()
        await self._cancel_final_wait()
        self._finals.clear()

    async def handle_user_turn_stopped(self):
        self._in_turn = False
        self._paused = False  # a final that comes now is not this turn's end
        await super().handle_user_turn_stopped()
        await self._cancel_hold()
        await self._cancel_final_wait()
        self._finals.clear()

    async def cleanup(self):
        await super().cleanup()
        await self._cancel_hold()
        await self._cancel_final_wait()
        if self._verdict is not None:
            self._verdict.cancel()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        if isinstance(frame, InputAudioRawFrame):
            self.silence.add(frame)
            if self.audio_check is not None:
                self._keep_audio(frame)
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self._ended = False  # pipecat keeps a turn open while the caller speaks
            await self._cancel_hold()  # the caller went on: the turn is still theirs
            await self._cancel_final_wait()
            self._verdict = None  # it judged the audio up to a pause that is over
            self._paused = False
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._vad_stop_at = time.monotonic()
            self._paused = True
            if self.audio_check is not None and self._audio:
                # Judged now, while the timeout runs, so the verdict is in when the turn may end.
                samples = np.concatenate(self._audio)
                self._verdict = asyncio.get_running_loop().create_task(
                    self.audio_check.probability(samples, self._sample_rate))
        elif isinstance(frame, PartialTranscriptionFrame) and frame.text.strip():
            self._worded_utterance = max(self._worded_utterance, frame.utterance_id)
        if isinstance(frame, (FinalTranscriptionFrame, NoWordsHeardFrame)):
            self._final_utterance = max(self._final_utterance, frame.utterance_id)
            if not self.final_awaited:
                await self._cancel_final_wait()  # the base ends the turn on this final, if it may
        if isinstance(frame, TranscriptionFrame) and frame.text.strip():
            self._finals.append(frame.text.strip())
            self._words_punctuated = isinstance(frame, FinalTranscriptionFrame)
        result = await super().process_frame(frame)
        if (isinstance(frame, TranscriptionFrame) and self.holding and self._held_for_words
                and unfinished(self.turn_text, self.rules_now) is None):
            await self._release("the words are finished now")
        elif isinstance(frame, FinalTranscriptionFrame) and self._question_answerable_now():
            self.ended_at_final += 1
            logger.debug(f"{self}: a finished question's final is in: the turn ends: [{self.turn_text}]")
            await self.trigger_user_turn_stopped()
        elif isinstance(frame, NoWordsHeardFrame) and self._wordless_turn_over():
            # pipecat's base waits for a transcript that will not come, until the aggregator's
            # user_turn_stop_timeout (5 s); a bot this sound cut off would be silent all that time.
            self.ended_without_words += 1
            logger.debug(f"{self}: the turn's sound held no words: it ends")
            await self._end()
        return result

    def _wordless_turn_over(self) -> bool:
        """A turn is in progress, the caller paused, and nothing they said in it had words."""
        return (self._in_turn and not self._ended and self._paused and not self._finals and not self.final_awaited
                and not self.holding and not self._speech_now())

    def _question_answerable_now(self) -> bool:
        """The caller paused after asking a whole question, and every final of it is in."""
        text = self.turn_text
        return (self.question_ends_at_final and not self._ended and self._paused and not self.final_awaited
                and not self.holding and self._final_wait_task is None and not self._speech_now()
                and text.endswith("?") and unfinished(text, self.rules_now) is None)

    @property
    def rules_now(self) -> CompletenessRules:
        """The rules for the turn's words as they are: ``open_ending`` only for Whisper's."""
        return self.rules if self._words_punctuated else self._unpunctuated_rules

    @property
    def turn_text(self) -> str:
        """The turn's final transcripts so far, joined."""
        return " ".join(self._finals)

    async def trigger_user_turn_stopped(self, *, enable_user_speaking_frames: bool | None = None):
        """End the turn now, unless its words are unfinished and the caller may still go on."""
        if self._ended or self.holding or self._final_wait_task is not None:
            return
        waited = time.monotonic() - self._vad_stop_at if self._vad_stop_at is not None else 0.0
        if self.final_awaited and waited < self.final_wait_s:
            # The base calls again when that final comes (its waits are over by then).
            self.waited_for_final += 1
            logger.debug(f"{self}: waiting up to {self.final_wait_s - waited:.2f} s for the final of utterance "
                         f"{self._worded_utterance}: [{self.turn_text}]")
            self._final_wait_task = self.task_manager.create_task(
                self._give_up_on_final(self.final_wait_s - waited, enable_user_speaking_frames),
                f"{self}::final_wait")
            return
        reason, by_audio = (await self._why_unfinished() if self.max_wait_s > 0 and waited < self.max_wait_s
                            else (None, False))
        if reason is not None:
            self.held += 1
            self._held_for_words = not by_audio
            self._end_args = {"enable_user_speaking_frames": enable_user_speaking_frames}
            logger.debug(f"{self}: holding the turn end up to {self.max_wait_s - waited:.2f} s: {reason}: [{self.turn_text}]")
            self._hold_task = self.task_manager.create_task(self._hold(self.max_wait_s - waited), f"{self}::hold")
            return
        await self._end(enable_user_speaking_frames=enable_user_speaking_frames)

    async def end_of_turn(self, *, enable_user_speaking_frames: bool | None = None):
        """The turn ends (overridden by strategies that settle something then)."""
        await super().trigger_user_turn_stopped(enable_user_speaking_frames=enable_user_speaking_frames)

    async def _end(self, **end_args):
        self._ended = True  # before any await: a frame processed meanwhile must not end it again
        await self.end_of_turn(**end_args)

    async def _why_unfinished(self) -> tuple[str | None, bool]:
        """Why the turn can't end yet (None: it can), and whether the audio said so rather than the words."""
        text = self.turn_text
        reason = unfinished(text, self.rules_now)
        if reason is not None or self._verdict is None or not text or text.rstrip().endswith("?"):
            return reason, False
        try:
            probability = await asyncio.wait_for(asyncio.shield(self._verdict), timeout=0.3)
        except Exception as error:  # no verdict in time (or the model failed): the words decide
            logger.debug(f"{self}: no {self.audio_check.name} verdict ({error!r}): the words decide")
            return None, False
        logger.debug(f"{self}: {self.audio_check.name}: {probability:.2f} finished: [{text}]")
        if probability < self.audio_check.threshold:
            self.held_by_audio += 1
            return f"{self.audio_check.name} says unfinished ({probability:.2f})", True
        return None, False

    async def _hold(self, wait_s: float):
        try:
            await asyncio.sleep(wait_s)
            grace = 0.0
            while self._speech_now() and grace < _RESUMING_GRACE_S:
                await asyncio.sleep(0.02)  # speech again: the VAD's start will cancel this hold
                grace += 0.02
        except asyncio.CancelledError:
            return
        self._hold_task = None
        self.released_by_timeout += 1
        logger.debug(f"{self}: no more words after the longest wait: the turn ends: [{self.turn_text}]")
        await self._end(**self._end_args)

    async def _give_up_on_final(self, wait_s: float, enable_user_speaking_frames: bool | None):
        try:
            await asyncio.sleep(wait_s)
        except asyncio.CancelledError:
            return
        self._final_wait_task = None
        logger.warning(f"{self}: no final for utterance {self._worded_utterance} {self.final_wait_s:.1f} s after "
                       f"the VAD stop: the turn ends on what was heard: [{self.turn_text}]")
        self._final_utterance = self._worded_utterance
        await self.trigger_user_turn_stopped(enable_user_speaking_frames=enable_user_speaking_frames)

    async def _cancel_final_wait(self):
        task, self._final_wait_task = self._final_wait_task, None
        if task is not None:
            await self.task_manager.cancel_task(task)

    def _speech_now(self) -> bool:
        # The clock counts only audio this strategy was given: with none, nothing is speech.
        return self.silence.now_s > 0 and self.silence.silence_s < 0.1

    async def _release(self, why: str):
        await self._cancel_hold()
        logger.debug(f"{self}: {why}: the turn ends: [{self.turn_text}]")
        await self._end(**self._end_args)

    async def _cancel_hold(self):
        task, self._hold_task = self._hold_task, None
        if task is not None:
            await self.task_manager.cancel_task(task)

    def _keep_audio(self, frame: InputAudioRawFrame):
        self._sample_rate = frame.sample_rate
        samples = np.frombuffer(frame.audio, dtype=np.int16)
        self._audio.append(samples)
        self._audio_samples += len(samples)
        while self._audio_samples - len(self._audio[0]) > self.audio_check.max_audio_s * frame.sample_rate:
            self._audio_samples -= len(self._audio.popleft())

"""One Whisper engine shared fairly by every call in the process.

Consumes transcription requests from the calls' STT services: a clip, whether it is a final
(the user's turn waits on it) or a partial, and which call asks. Returns the engine's result.
Measures ``load`` (jobs running or waiting), which the STT services read to slow their partial
cadence instead of queueing more work, and per-kind counts of jobs run, superseded and
cancelled, and of finals reviewed and changed by the second opinion.

The rules, because one CTranslate2 model transcribes one clip at a time:
- finals before partials: a caller whose turn just ended must not wait behind another call's
  partial;
- at most one partial per call waiting: a newer partial from the same call replaces the one
  still queued (its audio is older), which then returns ``None``;
- a final Whisper is unsure of (average log probability below ``doubt_below``: over the
  codec, tiny.en's mishearings "Car, I bet we'd cash" or "What a special dining to reach the
  shop" score -0.7 to -1.1, its right answers mostly above -0.3) is heard again by the
  ``second_opinion`` engine (base, beam search), and the surer of the two is the final; the
  review is a final's job too, so it waits behind no partial;
- with ``review_unrecognised``, so is a final, however sure, that the business does not
  ``recognise`` (no intent of its file asks it): tiny.en is sure of "Are you guys open on
  certain days?" (-0.13) and "What's that race on the store?", which base hears as "Sunday" and
  "address". Brisk can turn it off (``BRISK_STT_REVIEW_UNRECOGNISED``): such a turn then ends
  0.3-0.8 s sooner on 2 cores, and those two questions get "I don't know" (docs/benchmarks.md).
  Given ``about_the_business``, a sure final about nothing the business's file holds ("Do you
  have this sofa in blue?": no fact shares a word with it) is not heard again: a mishearing
  keeps the question's asking words ("open", "much", "where"), which facts hold, so a final
  with none of them is not the shop's question misheard, and the turn does not wait for base.
  A transcript the business recognises beats one it does not; between two it does not (or two
  it does), the one that heard more of the same number ("4572" over "452"), else the surer,
  wins. A final the business recognises at once is never held up: the fast path answers it;
- the second opinion runs on a thread of its own, beside the first engine (each engine has its
  own queue and worker): on 2 cores a review waits behind no partial and no partial behind a
  review, and a caller's pause can be heard by both at once (processors/stt/streaming_whisper.py);
- a stable partial the second opinion would hear again may be reviewed ``early``, while the
  caller may still be speaking: after every final's review, so no call's final waits behind
  another call's guess at its end (one that has started runs to its end);
- a cancelled job that has not started never runs, and one that has started stops between
  encoding and decoding (CTranslate2 cannot stop inside either), so cancelling frees the
  engine for the next job (the engine runs on a thread of its own, not the default pool the
  TTS and everything else share: ``WhisperEngine.transcribe_async``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from loguru import logger

from processors.stt.whisper_engine import WhisperEngine, WhisperResult

FINAL, EARLY_REVIEW, PARTIAL = 0, 1, 2  # priorities: lower runs first


Recognised = Callable[[str], bool]


def surer(first: WhisperResult, second: WhisperResult | None) -> WhisperResult:
    """The second opinion when it heard words and is surer of them than the first; else the first."""
    if second is None or not second.transcript or second.avg_logprob <= first.avg_logprob:
        return first
    return second


_DIGITS = re.compile(r"\d")


def _more_of_the_number(first: WhisperResult, second: WhisperResult) -> WhisperResult | None:
    """The one of two transcripts that heard more of the same number, if one did.

    Over a phone codec a fast digit string loses digits far more often than it gains any: base
    heard "four five seven two" as "452" where tiny.en heard "4572", and was surer of it. When
    one transcript's digits are the other's with some missing, the fuller one is kept, whoever
    is surer; the order it names is then the one the caller said.
    """
    digits = ["".join(_DIGITS.findall(r.transcript)) for r in (first, second)]
    if digits[0] == digits[1] or not all(digits):
        return None
    shorter, longer = sorted(digits, key=len)
    remaining = iter(longer)
    if len(shorter) < len(longer) and all(d in remaining for d in shorter):
        return first if digits[0] == longer else second
    return None


@dataclass(order=True)
class _Job:
    priority: int
    seq: int
    owner: object = field(compare=False)
    audio: np.ndarray = field(compare=False, repr=False)
    future: asyncio.Future = field(compare=False, repr=False)
    cancelled: threading.Event = field(compare=False, default_factory=threading.Event)
    task: asyncio.Task | None = field(compare=False, default=None, repr=False)
    engine: WhisperEngine | None = field(compare=False, default=None, repr=False)  # None: the main one


class WhisperScheduler:
    """Runs every call's transcriptions on one engine, finals first; see the module docstring."""

    def __init__(self, engine: WhisperEngine, *, second_opinion: WhisperEngine | None = None,
                 doubt_below: float = -0.4, recognised: Recognised | None = None,
                 review_unrecognised: bool = True, about_the_business: Recognised | None = None,
                 review_max_s: float | None = None, review_narrowband: bool = False):
        """Args:
            recognised: whether the business knows what a transcript asks (its intents): of two
                transcripts of one clip, the one it knows wins. None: the surer one always does.
            review_unrecognised: a sure final ``recognised`` does not know is heard again too;
                False: only unsure finals are.
            about_the_business: whether a transcript shares a word with anything the business's
                file holds; a sure final it is not about is not heard again for being
                unrecognised. None: every unrecognised one is.
            review_max_s: audio longer than this is never heard again. Base's beam search
                takes about a third of the audio's length on a busy core, and the turn waits
                for it: 1.5-1.8 s for a 6 s sentence, in which one misheard word seldom
                changes the answer, against 0.4 s for the short question where one word is
                the whole question. None: no limit.
            review_narrowband: every final of audio below 16 kHz (a phone line's 8 kHz) is heard
                again: tiny.en mishears narrowband speech about twice as often as wideband
                (docs/benchmarks.md, Hearing per condition; it helped little, so it is off).
        """
        self.engine = engine
        self.second_opinion = second_opinion
        self.doubt_below = doubt_below
        self.recognised = recognised
        self.review_unrecognised = review_unrecognised
        self.about_the_business = about_the_business
        self.review_max_s = review_max_s
        self.review_narrowband = review_narrowband
        # One queue, running job and worker per engine (None: the main one).
        self._queues: dict[WhisperEngine | None, list[_Job]] = {None: [], second_opinion: []}
        self._running: dict[WhisperEngine | None, _Job | None] = dict.fromkeys(self._queues)
        self._workers: dict[WhisperEngine | None, asyncio.Task | None] = dict.fromkeys(self._queues)
        self._seq = itertools.count()
        self.counts: Counter[str] = Counter()

    @property
    def load(self) -> int:
        """Jobs running or waiting, on both engines."""
        return sum(len(q) for q in self._queues.values()) + sum(j is not None for j in self._running.values())

    def doubts(self, result: WhisperResult | None, seconds: float | None = None, *, narrowband: bool = False) -> bool:
        """A final with words Whisper is unsure of, or sure words the business does not recognise
        but is about, which the second opinion should hear; ``seconds``: the length of its audio,
        when known; ``narrowband``: whether it is below 16 kHz (see ``review_narrowband``)."""
        if self.second_opinion is None or result is None or not result.transcript:
            return False
        if seconds is not None and self.review_max_s is not None and seconds > self.review_max_s:
            self.counts["review_skipped_long"] += 1
            return False
        if (narrowband and self.review_narrowband) or result.avg_logprob < self.doubt_below:
            return True
        if not self.review_unrecognised or self._knows(result):
            return False
        return self.about_the_business is None or self.about_the_business(result.transcript)

    def better(self, first: WhisperResult, second: WhisperResult | None) -> WhisperResult:
        """The one of two transcripts of the same audio to keep: the one the business recognises
        when only one is, else the surer."""
        if second is None or not second.transcript:
            return first
        known = self._knows(first), self._knows(second)
        if known[0] != known[1]:
            return second if known[1] else first
        return _more_of_the_number(first, second) or surer(first, second)

    def _knows(self, result: WhisperResult) -> bool:
        return self.recognised is None or self.recognised(result.transcript)

    async def review(self, audio: np.ndarray, first: WhisperResult, *, owner: object,
                     early: bool = False) -> WhisperResult:
        """The surer of ``first`` and the second opinion on the same ``audio``; ``first`` when the
        second opinion fails, so a broken review never costs the caller their words. ``early``:
        of a partial, before the turn ended (after every final in the queue)."""
        return self.settle(first, await self.hear_again(audio, owner=owner, early=early), early=early)

    async def hear_again(self, audio: np.ndarray, *, owner: object, early: bool = False) -> WhisperResult | Exception:
        """The second opinion's own transcript of ``audio``, to ``settle`` with the first; the
        error when it failed. Started before the first transcript is known, it hears a pause at
        the same time as the first engine."""
        try:
            return await self._run(audio, owner=owner, final=True, engine=self.second_opinion,
                                   priority=EARLY_REVIEW if early else FINAL)
        except Exception as e:
            return e

    def settle(self, first: WhisperResult, second: WhisperResult | Exception | None, *, early: bool = False) -> WhisperResult:
        """The transcript to keep of ``first`` and the second opinion's (``hear_again``) of the same audio."""
        if isinstance(second, Exception):
            logger.opt(exception=second).error("whisper: the second opinion failed; keeping the first transcript")
            self.counts["review_failed"] += 1
            return first
        self.counts["reviewed"] += 1
        self.counts["reviewed_early"] += early
        kept = self.better(first, second)
        # loguru's own formatting: on the turn's path, nothing is formatted unless DEBUG is on.
        logger.debug("whisper: second opinion [{}] ({:.2f}) on [{}] ({:.2f}): kept the {}",
                     second.transcript if second else "", second.avg_logprob if second else float("nan"),
                     first.transcript, first.avg_logprob, "second" if kept is not first else "first")
        self.counts["reviewed_changed"] += kept is not first
        return kept

    async def transcribe(self, audio: np.ndarray, *, owner: object, final: bool) -> WhisperResult | None:
        """Transcribe ``audio`` for ``owner`` (one call's STT); None when a newer partial replaced it."""
        return await self._run(audio, owner=owner, final=final, engine=None)

    async def _run(self, audio: np.ndarray, *, owner: object, final: bool,
                   engine: WhisperEngine | None, priority: int | None = None) -> WhisperResult | None:
        kind = "final" if final else "partial"
        loop = asyncio.get_running_loop()
        queue = self._queues[engine]
        if not final:
            for queued in queue:
                if queued.owner is owner and queued.priority == PARTIAL and not queued.future.done():
                    queued.future.set_result(None)
                    self.counts["partial_superseded"] += 1
            queue[:] = [j for j in queue if not j.future.done()]
            heapq.heapify(queue)
        if priority is None:
            priority = FINAL if final else PARTIAL
        job = _Job(priority, next(self._seq), owner, audio, loop.create_future(), engine=engine)
        heapq.heappush(queue, job)
        self._ensure_worker(loop, engine)
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            # Queued: it never runs. Running: it stops at the next stage boundary.
            job.cancelled.set()
            if job.task is not None:
                job.task.cancel()
            if not job.future.done():
                job.future.cancel()
            self.counts[f"{kind}_cancelled"] += 1
            raise

    def _ensure_worker(self, loop: asyncio.AbstractEventLoop, engine: WhisperEngine | None):
        worker = self._workers[engine]
        if worker is None or worker.done() or worker.get_loop() is not loop:
            self._workers[engine] = loop.create_task(self._work(engine), name=f"whisper-scheduler-{engine and engine.name}")

    async def _work(self, engine: WhisperEngine | None):
        loop = asyncio.get_running_loop()
        queue = self._queues[engine]
        while queue:
            job = heapq.heappop(queue)
            # A job left by an event loop that has gone (tests run one per test) has nobody waiting.
            if job.future.done() or job.future.get_loop() is not loop:
                continue
            self._running[engine] = job
            job.task = asyncio.ensure_future(
                (engine or self.engine).transcribe_async(job.audio, should_stop=job.cancelled.is_set)
            )
            # wait(), not await: the caller cancelling its job must not end this loop.
            await asyncio.wait({job.task})
            self._running[engine] = None
            if job.future.done() or job.task.cancelled():
                continue
            if job.task.exception() is not None:  # the caller reports it; the loop goes on
                job.future.set_exception(job.task.exception())
            else:
                job.future.set_result(job.task.result())
                self.counts["partial" if job.priority == PARTIAL else "final"] += 1
        self._workers[engine] = None

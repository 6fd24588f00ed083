"""The call's opening and its quiet moments: the greeting, "Are you still there?", the idle hang-up.

``greeting_frames`` are what a transport queues when its caller is connected (the business's
greeting, spoken and kept in the context, so the LLM knows it was said). ``IdleCaller`` answers
pipecat's ``on_user_turn_idle`` (the user aggregator's idle controller, armed when the bot stops
speaking): the first time the caller has said nothing for ``BRISK_USER_IDLE_SECS`` it asks once
whether they are still there; after ``BRISK_USER_IDLE_HANGUP_SECS`` more it says goodbye and
ends the call with pipecat's ``EndWorkerFrame``, which lets the goodbye play out first. The
caller speaking starts it over.

While a business tool's form waits for an answer (agent/tools/form.py), silence is the caller
stuck, not gone: the first idle asks the step's question again, the second leaves the form and
offers a person (the caller's "yes" is the hand-over: agent/tools/router.py).
"""

from __future__ import annotations

from loguru import logger
from pipecat.frames.frames import EndWorkerFrame, TTSSpeakFrame, UserIdleTimeoutUpdateFrame
from pipecat.processors.frame_processor import FrameDirection

from agent.business.model import Business
from agent.call.call_control import CallControl


def greeting_frames(business: Business) -> list:
    return [TTSSpeakFrame(business.greeting)]


class IdleCaller:
    """One call's answer to a quiet caller; see the module docstring."""

    def __init__(self, business: Business, control: CallControl, *, ask_after_s: float, hang_up_after_s: float,
                 tools=None):
        """``tools``: the call's ``CallTools``, whose form a quiet caller may be stuck in."""
        self.business = business
        self.control = control
        self.tools = tools
        self.reasked = False  # the form's question said again for this silence
        self.ask_after_s = ask_after_s
        self.hang_up_after_s = hang_up_after_s
        self.asked = False
        self.prompts = 0  # "Are you still there?" said, for the call's record and tests

    def attach(self, user_aggregator) -> None:
        user_aggregator.add_event_handler("on_user_turn_idle", self._on_idle)
        user_aggregator.add_event_handler("on_user_turn_started", self._on_caller_spoke)

    async def _on_idle(self, aggregator) -> None:
        form = self.tools.form if self.tools is not None else None
        if form is not None and form.step is not None:
            await self._stuck_in(form, aggregator)
            return
        if not self.asked:
            self.asked = True
            self.prompts += 1
            logger.info(f"call {self.control.call_id}: the caller is quiet; asking if they are still there")
            await aggregator.push_frame(TTSSpeakFrame(self.business.still_there, append_to_context=False))
            # The next idle, after the question has been said, is counted from the shorter wait.
            await aggregator.queue_frame(UserIdleTimeoutUpdateFrame(timeout=self.hang_up_after_s))
            return
        await self.control.ending("idle", "abandoned")
        await aggregator.push_frame(TTSSpeakFrame(self.business.idle_goodbye, append_to_context=False))
        await aggregator.push_frame(EndWorkerFrame(reason="the caller stayed quiet"), FrameDirection.UPSTREAM)

    async def _stuck_in(self, form, aggregator) -> None:
        if not self.reasked:
            self.reasked = True
            logger.info(f"call {self.control.call_id}: the caller is quiet in a form; asking its step again")
            await aggregator.push_frame(TTSSpeakFrame(form.question()))
            return
        self.reasked = False
        form.leave()
        logger.info(f"call {self.control.call_id}: the caller stayed quiet in a form; offering a person")
        await aggregator.push_frame(TTSSpeakFrame(f"I'll leave that for now. {self.business.person_offer}"))

    async def _on_caller_spoke(self, aggregator, *_args) -> None:
        self.reasked = False
        if self.asked:
            self.asked = False
            await aggregator.queue_frame(UserIdleTimeoutUpdateFrame(timeout=self.ask_after_s))

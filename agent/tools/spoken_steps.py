"""How a flow's step says its question: an action that does not wait for the speech.

pipecat's ``tts_say`` holds the node's set-up until its speech has gone down the pipeline, and
when the caller cuts in over the question, the interruption drops the frame it waits for
(pipecat issue #5263), so the flow never reaches the step and the caller's answer finds none.
``SAY`` queues the question and returns. Used by the rental booking (agent/tools/booking.py)
and the business tools' forms (agent/tools/form.py).
"""

from __future__ import annotations

import re

from pipecat.flows import FlowConfig, FlowManager
from pipecat.frames.frames import TTSSpeakFrame

SAY = "brisk_say"


def rendered(text: str, state: dict) -> str:
    """``text`` with its ``{{ key }}`` filled from the flow's state."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: str(state.get(m.group(1), "")), text)


async def _say(action: dict, flow_manager: FlowManager) -> None:
    text = rendered(action.get("text", ""), flow_manager.state)
    await flow_manager.worker.queue_frame(
        TTSSpeakFrame(text=text, append_to_context=action.get("append_text_to_context", True)))


def speak_steps(flow_manager: FlowManager) -> None:
    """Let ``flow_manager``'s nodes use the ``SAY`` action."""
    flow_manager.register_action(SAY, _say)


def saying_without_waiting(config: FlowConfig) -> FlowConfig:
    """``config`` with its steps' ``tts_say`` actions said by ``SAY``."""
    def actions(listed):
        return [a.model_copy(update={"type": SAY}) if a.type == "tts_say" else a for a in listed]
    nodes = {name: node.model_copy(update={"pre_actions": actions(node.pre_actions),
                                           "post_actions": actions(node.post_actions)})
             for name, node in config.nodes.items()}
    return config.model_copy(update={"nodes": nodes})

"""Run one assembled call to its end, whatever the transport, and free its line afterwards.

Every transport (WebRTC, Twilio, LiveKit) runs its calls through ``run_call``: the pipeline
worker runs under a ``WorkerRunner`` until the caller leaves, the call is ended, its caller
has sent no audio for the idle timeout (pipecat's worker idle machinery, set up in
agent/call/pipeline.py), or it reaches the maximum call duration; then the admission ticket is
released, so no line stays taken by a call that is over. The call's record (agent/records/) is
opened before it runs and closed with its status after.
"""

from __future__ import annotations

import asyncio

from loguru import logger
from pipecat.workers.runner import WorkerRunner

from agent.call.admission import Ticket
from agent.call.pipeline import Call


async def run_call(call: Call, *, label: str, ticket: Ticket | None, max_duration_s: float | None) -> None:
    """Run ``call`` to its end; ``label`` names it in the log ("call <pc_id>")."""
    limit = None
    ending: list[asyncio.Task] = []  # held, so the loop does not drop the task half way
    if max_duration_s:
        loop = asyncio.get_running_loop()

        def over_time():
            logger.warning(f"{label}: reached the maximum call duration ({max_duration_s:g} s); ending it")
            if call.control is not None and call.control.ended_by is None:
                call.control.ended_by = "max_duration"  # what the call's record says ended it
            ending.append(loop.create_task(call.worker.cancel(reason="maximum call duration")))

        limit = loop.call_later(max_duration_s, over_time)
    recorder = call.recorder
    if recorder is not None:
        await recorder.open()
    failed = False
    try:
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(call.worker)
        await runner.run()
    except Exception:
        failed = True
        logger.exception(f"{label} failed")
    finally:
        if limit is not None:
            limit.cancel()
        if recorder is not None:
            await recorder.close(failed=failed)
        if ticket is not None:
            ticket.release()

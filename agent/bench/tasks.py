"""The FAQ suite's task scenarios: the agent acting, over real calls, and the LLM's own tool calls.

``run_tasks``: each scenario is one WebRTC call to Brisk on the embedded default, the caller's
turns spoken with espeak-ng (a keyed number is pipecat's ``InputDTMFFrame``s queued at the call's
input, as the Twilio serializer makes them: a browser has no keypad; the phone path's keypad
is tested over the Twilio WebSocket in tests/test_tools_e2e.py):

- ``order-spoken``: "Where is my order number four five seven two?"
- ``order-keyed``: "I want to check on my order.", then 4572# on the keypad;
- ``booking``: "I would like to rent two city bikes for Saturday.", then whatever the form asks;
- ``person``: "Can I talk to a person, please?"

A scenario succeeds when its tool did the job (the order found and read back, the rental in the
store, the call handed over). Per tool turn: voice-to-voice (true end of speech, or the last
key, to the first audible bot audio at the caller) and whether a filler was said.

``measure_llm_tools``: the same requests as text to the embedded LLM with the tools offered, as
an LLM that calls tools would get them, and to Brisk's intent router: how often each picks the
right tool with the right arguments, and calls one for a question that needs none.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import numpy as np
from pipecat.audio.dtmf.types import KeypadEntry
from pipecat.frames.frames import InputDTMFFrame

from agent.bench.corpus import render, spoken
from agent.caller.aiortc_caller import WavMicrophone, WebRTCCaller

# What the caller answers at each step of the rental's form (agent/tools/form.py).
BOOKING_ANSWERS = {"give_bike": "A city bike, please.", "give_day": "On Saturday.", "give_count": "Two bikes.",
                   "give_name": "My name is Anna.", "confirm_book_rental": "Yes, please."}
QUIET_S = 1.5
KEY_GAP_S = 0.15


@dataclass(frozen=True)
class Task:
    id: str
    voice: str
    opening: str
    keys: str = ""


TASKS = (
    Task("order-spoken", "en-us", "Where is my order number four five seven two?"),
    Task("order-keyed", "en-gb", "I want to check on my order.", keys="4572#"),
    Task("booking", "en-us+f2", "I would like to rent two city bikes for Saturday."),
    Task("person", "en-gb-scotland", "Can I talk to a person, please?"),
)


async def _say(mic: WavMicrophone, caller: WebRTCCaller, task_id: str, voice: str, text: str, n: int) -> float:
    clip = render(spoken(f"task-{task_id}-{n}", "task", voice, 160, text))
    start = mic.say(clip.samples)
    await asyncio.wait_for(mic.finished.wait(), clip.duration_s + 10)
    end = mic.time_of_sample(start + round(clip.speech_end_s * clip.sample_rate))
    await caller.wait_until_quiet(end, quiet_secs=QUIET_S, max_secs=30)
    return end


async def run_task(side, task: Task, store) -> dict:
    """One scenario, one call; see the module docstring."""
    caller = WebRTCCaller(side.base_url)
    mic = WavMicrophone(np.zeros(8000, dtype=np.int16), 16000)
    await caller.connect(mic)
    call = side.app.state.calls.calls.get(caller.pc_id)
    task_of_call = side.app.state.calls.tasks.get(caller.pc_id)
    bookings_before = len(await store.bookings())
    ends = []
    try:
        ends.append(await _say(mic, caller, task.id, task.voice, task.opening, 0))
        if task.keys:
            for key in task.keys:  # pressed one by one, as a keypad sends them
                await call.worker.queue_frame(InputDTMFFrame(KeypadEntry(key)))
                await asyncio.sleep(KEY_GAP_S)
            ends.append(time.monotonic())
            await caller.wait_until_quiet(ends[-1], quiet_secs=QUIET_S, max_secs=30)
        form = call.tools.form
        for n in range(1, 9):
            if task.id != "booking" or form.step is None:
                break
            ends.append(await _say(mic, caller, task.id, task.voice, BOOKING_ANSWERS[form.step], n))
    finally:
        await caller.close()
        if task_of_call is not None:
            # The call's line is free once its pipeline has ended: the next scenario needs it.
            await asyncio.wait([task_of_call], timeout=10)
    tools = call.tools.calls
    found = [c for c in tools if c["name"] == "lookup_order" and c["result"].get("found")]
    said = " ".join(r.get("bot_text", "") for r in call.latency.turns)
    success = {
        "order-spoken": bool(found) and found[0]["result"]["order_number"] == "4572" and "4 5 7 2" in said,
        "order-keyed": bool(found) and found[0]["result"]["order_number"] == "4572" and "4 5 7 2" in said,
        "booking": len(await store.bookings()) == bookings_before + 1,
        "person": call.control.outcome == "transferred",
    }[task.id]
    v2v = [round((first - end) * 1000, 1) for end in ends if (first := caller.first_audible_after(end)) is not None]
    return {"task": task.id, "success": success, "turns": len(ends), "tool_calls": [c["name"] for c in tools],
            "v2v_ms": v2v, "filler_spoken": call.filler.fillers if call.filler else 0,
            "heard": [r.get("user_text", "") for r in call.latency.turns]}


async def run_tasks(side, store, log) -> dict:
    results = []
    for task in TASKS:
        result = await run_task(side, task, store)
        log(f"task {task.id:13} {'ok  ' if result['success'] else 'FAIL'} turns {result['turns']} "
            f"v2v {result['v2v_ms']} filler {result['filler_spoken']} heard {result['heard']}")
        results.append(result)
    v2v = sorted(v for r in results for v in r["v2v_ms"])
    return {"success_rate": round(sum(r["success"] for r in results) / len(results), 3),
            "tool_turn_v2v_ms": {"p50": v2v[len(v2v) // 2] if v2v else None, "max": v2v[-1] if v2v else None, "n": len(v2v)},
            "fillers": sum(r["filler_spoken"] for r in results), "scenarios": results}


# (request, the tool a right answer calls, what its arguments must hold) and questions that need none.
TOOL_REQUESTS = (
    ("Where is my order? The number is 4572.", "lookup_order", {"order_number": "4572"}),
    ("My order number is 4 5 7 2, has it shipped?", "lookup_order", {"order_number": "4572"}),
    ("Can I talk to a person, please?", "transfer_to_human", {}),
    ("I'd like to speak to someone.", "transfer_to_human", {}),
    ("I want to rent two city bikes on Saturday.", "book_rental", {"count": 2}),
    ("Can I book a bike for tomorrow?", "book_rental", {}),
    ("Thanks, that's all, goodbye.", "end_call", {}),
    ("What time do you open on Saturday?", None, {}),
    ("Do you repair electric scooters?", None, {}),
    ("How much is a basic tune-up?", None, {}),
)


def _called(message) -> tuple[str | None, dict, bool]:
    """(tool, arguments, parsed): a real tool call, or one written out as JSON text."""
    if message.tool_calls:
        call = message.tool_calls[0].function
        return call.name, json.loads(call.arguments or "{}"), True
    try:
        written = json.loads((message.content or "").strip())
        return written.get("name"), written.get("arguments") or {}, False
    except (ValueError, AttributeError):
        return None, {}, False


def _holds(arguments: dict, expected: dict) -> bool:
    return all(str(arguments.get(k, "")).replace(" ", "") == str(v) for k, v in expected.items())


async def measure_llm_tools(runtime, config, router_for) -> dict:
    """The embedded LLM offered the tools, against Brisk's intent router, on ``TOOL_REQUESTS``."""
    from agent.tools.functions import tools_schema
    from pipecat.adapters.llm.services.open_ai_adapter import OpenAILLMAdapter

    business = config.business_definition
    tools = OpenAILLMAdapter().to_provider_tools_format(tools_schema(business))
    client, model = runtime.resources.llm_client, runtime.resources.llm_model
    rows = []
    for text, tool, expected in TOOL_REQUESTS:
        response = await client.chat.completions.create(
            model=model, max_tokens=60, temperature=config.llm_temperature, tools=tools,
            messages=[{"role": "system", "content": config.system_prompt}, {"role": "user", "content": text}])
        name, arguments, parsed = _called(response.choices[0].message)
        routed = router_for()(text)
        rows.append({"request": text, "expected": tool, "llm_tool": name, "llm_parsed_as_call": parsed,
                     "llm_right": name == tool and (tool is None or _holds(arguments, expected)),
                     "router_tool": routed.tool if routed else None,
                     "router_right": (routed.tool if routed else None) == tool
                     and (tool is None or _holds(routed.arguments, expected))})
    needs = [r for r in rows if r["expected"]]
    none = [r for r in rows if not r["expected"]]
    return {
        "requests": len(rows),
        "llm": {"right": sum(r["llm_right"] for r in rows), "parsed_as_tool_calls": sum(r["llm_parsed_as_call"] for r in rows),
                "called_when_none_needed": sum(1 for r in none if r["llm_tool"])},
        "router": {"right": sum(r["router_right"] for r in rows),
                   "called_when_none_needed": sum(1 for r in none if r["router_tool"])},
        "needs_a_tool": len(needs), "rows": rows,
    }

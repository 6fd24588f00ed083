"""`python -m agent eval`: pipecat.evals scenario files run against Brisk's own pipeline.

Every shipped business's scenarios pass over real calls of the embedded default (Silero, tiny.en, Qwen
0.5B on llama-server), in text modality through pipecat's eval harness and WebSocket transport
(each file's barge-in scenario spoken: the caller cuts in over a long answer);
two scenarios run at once each on a call of its own; and the real command, in its own process,
runs a file written here (outside the project), exits non-zero naming the scenario that cannot
pass, says plainly that the embedded model cannot judge an `eval:` criterion, and writes its
JSON and JUnit reports.
"""

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from xml.etree import ElementTree

import pytest
import pytest_asyncio
from fastapi import FastAPI
from pipecat.evals.script_session import EvalScriptSession

from agent.bench.scripted_llm import ScriptedLLM
from agent.call.pipeline import build_call
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.evals.runner import NO_JUDGE, load_scenarios, run_scenarios
from agent.runtime.runtime import Runtime
from agent.transports.eval import EVAL_PATH, EvalLine

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.e2e]

SHOP_SCENARIOS = "agent/business/harbor_lane_bikes.scenarios.yaml"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime():
    runtime = Runtime(load_config())
    await runtime.start()
    yield runtime
    await runtime.stop()


async def test_the_shops_own_scenarios_pass_over_its_own_pipeline(runtime):
    scenarios = load_scenarios([SHOP_SCENARIOS])
    result = await run_scenarios(runtime.config, scenarios, runtime=runtime, log=lambda _: None)
    failed = [(s["name"], s["failures"]) for s in result["scenarios"] if not s["passed"]]
    assert not failed, failed
    assert result["passed"] == len(scenarios) >= 8 and result["failed"] == 0
    names = {s["name"] for s in result["scenarios"]}
    assert {"harbor-lane-bikes/rental-booked-by-its-form", "harbor-lane-bikes/order-keyed-after-asking"} <= names
    assert all(t["status"] == "passed" for s in result["scenarios"] for t in s["turns"])
    assert_cut_in(result)


def assert_cut_in(result: dict):
    """The barge-in scenario ran spoken, cut the bot's answer and had the new question answered."""
    [cut_in] = [s for s in result["scenarios"] if s["name"].endswith("/cutting-in-over-an-answer")]
    hours, phone = cut_in["heard"][:2]
    assert hours["interrupted"] and "hours" in hours["user_text"].lower(), cut_in["heard"]
    assert "phone" in phone["user_text"].lower() and phone["v2v_ms"] > 0


async def test_spoken_the_same_scenario_is_heard_through_a_real_call_and_each_turn_has_its_v2v(runtime):
    [hours] = [s for s in load_scenarios([SHOP_SCENARIOS]) if s.name.endswith("/saturday-hours")]
    result = await run_scenarios(runtime.config, [hours], audio=True, runtime=runtime, log=lambda _: None)
    [scenario] = result["scenarios"]
    assert scenario["passed"], scenario
    [turn] = scenario["heard"]
    assert "Saturday" in turn["user_text"] and "4 in the afternoon" in turn["bot_text"]  # heard by Whisper, said
    assert turn["path"] == "hours" and turn["v2v_ms"] > 0


async def test_a_text_caller_is_present_while_it_sends_messages_and_is_not_hung_up_as_idle(runtime, tmp_path):
    """The idle timeout ends a caller who sends nothing; a text-mode caller sends no audio at all,
    so its messages must count, or a scenario longer than the timeout is cut off mid-way."""
    def build_idle(resources, *args, **kwargs):
        short = replace(resources, config=resources.config.model_copy(update={"call_idle_timeout_secs": 2.5}))
        return build_call(short, *args, **kwargs)

    file = tmp_path / "slow_caller.yaml"
    file.write_text("""
name: slow
scenarios:
  - name: three-questions-over-longer-than-the-timeout
    turns:
      - user: "Where are you based?"
        expect: [{event: response, text_contains: "42 Harbor Lane"}]
      - user: "And what's your phone number?"
        send_after: {delay_ms: 1500}
        expect: [{event: response}]
      - user: "Where are you again?"
        send_after: {delay_ms: 1500}
        expect: [{event: response, text_contains: "42 Harbor Lane"}]
""")
    [scenario] = load_scenarios([str(file)])
    line = EvalLine(runtime, build=build_idle)
    app = FastAPI()
    app.include_router(line.router)
    async with serve_app(app) as base_url:
        result = await EvalScriptSession(scenario, base_url.replace("http://", "ws://") + EVAL_PATH).run()
    assert result.passed, result.failures


async def test_two_scenarios_at_once_each_run_on_a_call_of_its_own(runtime):
    by_name = {s.name: s for s in load_scenarios([SHOP_SCENARIOS])}
    line = EvalLine(runtime)
    both = asyncio.Event()
    line.listeners.append(lambda _call_id, _call: both.set() if len(line.calls) == 2 else None)
    app = FastAPI()
    app.include_router(line.router)
    async with serve_app(app) as base_url:
        url = base_url.replace("http://", "ws://") + EVAL_PATH
        sessions = [EvalScriptSession(by_name[f"harbor-lane-bikes/{name}"], url)
                    for name in ("order-said-digit-by-digit", "rental-booked-by-its-form")]
        results = await asyncio.gather(*(s.run() for s in sessions))
    assert both.is_set()  # both calls were in progress together
    assert [r.passed for r in results] == [True, True], [r.failures for r in results]


def test_a_file_written_outside_the_project_runs_and_a_scenario_that_cannot_pass_fails_by_name(tmp_path):
    scenarios = tmp_path / "my_checks.yaml"
    scenarios.write_text("""
name: my-checks
scenarios:
  - name: where-are-you
    turns:
      - user: "Sorry, where is it you're based again?"
        expect:
          - event: response
            text_contains: "42 Harbor Lane"
  - name: unicorns-on-sale
    turns:
      - user: "Do you sell unicorns?"
        expect:
          - event: response
            text_contains: "Yes, we sell unicorns"
            within_ms: 15000
  - name: judged
    turns:
      - user: "What time do you open on Monday?"
        expect:
          - event: response
            eval: "says when the shop opens on Monday"
""")
    out, junit = tmp_path / "result.json", tmp_path / "result.xml"
    proc = subprocess.run([sys.executable, "-m", "agent", "eval", str(scenarios), "--json", str(out), "--junit", str(junit)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "FAIL  my-checks/unicorns-on-sale" in proc.stdout and "PASS  my-checks/where-are-you" in proc.stdout
    result = json.loads(out.read_text())
    assert (result["passed"], result["failed"]) == (1, 2)
    by_name = {s["name"]: s for s in result["scenarios"]}
    assert by_name["my-checks/where-are-you"]["passed"]
    [wrong] = by_name["my-checks/unicorns-on-sale"]["failures"]
    assert "Yes, we sell unicorns" in wrong["reason"]
    [unjudged] = by_name["my-checks/judged"]["failures"]
    assert unjudged["reason"] == NO_JUDGE and unjudged["kind"] == "no_judge"
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    assert [c.get("name") for c in suite if c.find("failure") is not None] == ["my-checks/unicorns-on-sale",
                                                                               "my-checks/judged"]


@pytest.mark.parametrize("business", ["corner_slice_pizza", "willowbank_vets", "brightwater_plumbing"])
def test_every_example_business_passes_its_own_scenarios(business, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, "-m", "agent", "eval", f"agent/business/examples/{business}.scenarios.yaml",
                           "--json", str(out)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "BRISK_BUSINESS": f"agent/business/examples/{business}.yaml"})
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["failed"] == 0 and result["passed"] == len(result["scenarios"]) >= 5
    assert_cut_in(result)


JUDGED = """
name: judged
scenarios:
  - name: monday-opening
    turns:
      - user: "What time do you open on a Monday?"
        expect:
          - event: response
            eval: "says when the shop opens on Monday"
  - name: unicorns
    turns:
      - user: "What time do you open on a Monday?"
        expect:
          - event: response
            eval: "says the shop sells unicorns"
"""


def _verdict(messages: list[dict]) -> str:
    """A scripted judge: yes to every criterion but the unicorns one (the test pins the wiring,
    that the configured LLM is asked and its verdict kept, not a model's judgment)."""
    yes = 0.03 if "unicorn" in str(messages[-1].get("content", "")) else 0.97
    return json.dumps({"choice": "yes" if yes > 0.5 else "no", "probability": yes,
                       "probabilities": {"yes": yes, "no": 1 - yes, "continue": 0.0}})


async def test_an_eval_criterion_is_judged_by_the_configured_llm(tmp_path):
    judge = ScriptedLLM(ttft_s=0.01, tokens_per_s=1000.0, answer_for=_verdict)
    scenarios = tmp_path / "judged.yaml"
    scenarios.write_text(JUDGED)
    async with serve_app(judge.app()) as judge_url:
        config = load_config(llm_base_url=f"{judge_url}/v1", llm_model="scripted")
        result = await run_scenarios(config, load_scenarios([str(scenarios)]), log=lambda _: None)
    by_name = {s["name"]: s for s in result["scenarios"]}
    assert by_name["judged/monday-opening"]["passed"], by_name
    [no] = by_name["judged/unicorns"]["failures"]
    assert no["kind"] == "judge_no"
    assert any("unicorns" in str(r.messages) for r in judge.requests)  # the criterion reached the judge


def test_a_malformed_scenario_file_is_refused_by_name_before_anything_starts(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nscenarios:\n  - turns: [{user: hi}]\n")
    proc = subprocess.run([sys.executable, "-m", "agent", "eval", str(broken), str(tmp_path / "missing.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {broken}:"), proc.stderr

"""``python -m agent eval PATH...``: a business's scenarios, run against Brisk's own pipeline.

Consumes pipecat.evals scenario files (YAML: scripted turns with ``expect:``ations,
``text_contains`` / ``text_excludes``, function calls and their arguments, keypad, ``within_ms``
budgets, ``eval:`` criteria for a judge; docs/evals.md). Starts the runtime of the business in
``BRISK_BUSINESS`` (its models and LLM, as ``serve`` would), serves the eval line
(agent/transports/eval.py) on a free loopback port, and runs each scenario there with pipecat's
``EvalScriptSession``: one call per scenario, built by ``build_call`` as a caller's is.

Text modality unless ``audio`` (then each scenario's user turns are spoken by the harness's TTS
and heard by Brisk's VAD and Whisper). An ``eval:`` criterion is judged by the configured LLM
(``BRISK_LLM_BASE_URL``); the embedded model does not judge, and such a criterion fails saying so
rather than passing.

Returns ``{"passed": n, "failed": n, "scenarios": [{"name", "passed", "failures": [...],
"turns": [...], "heard": [...]}]}``: each scripted turn's status and duration (``duration_ms``:
from the turn sent to its last expectation met), and each turn of the call as Brisk measured it
(what it heard and said, the path that answered, ``v2v_ms`` with ``--audio``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from fastapi import FastAPI
from loguru import logger
from pipecat.evals.scenario import EvalScenarioFile
from pipecat.evals.script import EvalScriptScenario
from pipecat.evals.script_session import EvalScriptSession
from pipecat.evals.services import tts_service_from_config
from pipecat.evals.session import EvalSessionParams

from agent.caller.loopback import serve_app
from agent.evals import caller_voice
from agent.config import BriskConfig
from agent.runtime.runtime import Runtime
from agent.transports.eval import EVAL_PATH, EvalLine

NO_JUDGE = ("cannot judge 'eval:' criteria with the embedded LLM: set BRISK_LLM_BASE_URL (and BRISK_LLM_MODEL) "
            "to an LLM that can judge, or check with text_contains / text_excludes")


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file and why."""


def load_scenarios(paths: list[str]) -> list[EvalScriptScenario]:
    """Every scripted scenario of ``paths``, in order; raises ``ScenarioError`` naming the file."""
    scenarios = []
    for path in paths:
        if not Path(path).is_file():
            raise ScenarioError(f"{path}: no such file")
        try:
            loaded = EvalScenarioFile.load(path)
        except Exception as error:  # pipecat raises ValueError, yaml's errors or KeyError: all mean the file
            raise ScenarioError(f"{path}: {type(error).__name__}: {error}") from None
        for scenario in loaded:
            if not isinstance(scenario, EvalScriptScenario):
                raise ScenarioError(f"{path}: {scenario.name}: only scripted scenarios (turns:) are run; "
                                    "a simulated caller (persona:) needs an LLM to play it")
            scenarios.append(scenario)
    return scenarios


def _judge(config: BriskConfig):
    """The configured LLM as judge, or None (the embedded model is not one)."""
    if not config.llm_base_url:
        return None
    from pipecat.evals.judge import EvalJudge
    from pipecat.services.openai.llm import OpenAILLMService

    llm = OpenAILLMService(api_key=config.llm_api_key or "none", base_url=config.llm_base_url,
                           settings=OpenAILLMService.Settings(model=config.llm_model))
    return EvalJudge(llm, explainer=llm)


def _spoken(scenario: EvalScriptScenario) -> EvalScriptScenario:
    """``scenario`` with its user turns spoken (audio modality: espeak-ng's voice unless it names
    one, agent/evals/caller_voice.py) and the bot's speech on. The bot's answers are checked as
    the words its TTS spoke (``tts_response``): transcribing its audio back would need a second
    recogniser, and would grade that recogniser's mishearings as the bot's."""
    turns = [dataclasses.replace(turn, expect=[_as_said(e) for e in turn.expect]) for turn in scenario.turns]
    return dataclasses.replace(scenario, turns=turns, user_audio=True, bot_audio=True,
                               user_speech=scenario.user_speech or dict(caller_voice.DEFAULT))


def _as_said(expectation):
    # pipecat reads a file's `response` as `llm_response` when the file is in text modality, as
    # ours are: either is the bot's answer, and spoken, that is what its TTS says (a form's
    # question is spoken without the LLM).
    if expectation.event in ("response", "llm_response"):
        return dataclasses.replace(expectation, event="tts_response")
    return expectation


def _heard(call) -> list[dict]:
    """The call's turns as Brisk measured them (processors/observers/latency.py): what it heard
    and said, which path answered, and voice-to-voice (the end of the caller's speech, as the
    VAD put it, to the first audio out; None in text modality, where nothing is heard or said)."""
    if call is None:
        return []
    return [{"user_text": t["user_text"], "bot_text": t["bot_text"], "path": t["fast_path"] or "llm",
             "v2v_ms": t["stages_ms"].get("first_audio_out"), "interrupted": t["interrupted"]}
            for t in call.latency.turns]


def _report(scenario: EvalScriptScenario, result, call=None) -> dict:
    failures = []
    for failure in result.failures:
        reason = NO_JUDGE if failure.kind == "no_judge" else failure.reason
        failures.append({"turn": failure.turn_index, "event": failure.event_name, "kind": failure.kind,
                         "reason": reason})
    return {
        "name": scenario.name,
        "passed": bool(result.passed),
        "failures": failures,
        "turns": [{"turn": t.turn_index, "status": t.status, "duration_ms": t.duration_ms} for t in result.turns],
        "duration_ms": result.duration_ms,
        "heard": _heard(call),
    }


async def run_scenarios(config: BriskConfig, scenarios: list[EvalScriptScenario], *, audio: bool = False,
                        runtime: Runtime | None = None, log=print) -> dict:
    """Run ``scenarios`` against a Brisk of ``config`` (or the started ``runtime``); see the module docstring."""
    owns_runtime = runtime is None
    runtime = runtime or Runtime(config)
    if owns_runtime:
        await runtime.start()
    line = EvalLine(runtime, max_duration_s=config.call_max_duration_secs or None)
    placed: list = []  # the scenario's call, for its turns as Brisk measured them
    line.listeners.append(lambda _call_id, call: placed.append(call))
    app = FastAPI(title="Brisk evals")
    app.include_router(line.router)
    judge = _judge(config)
    reports = []
    try:
        async with serve_app(app) as base_url:
            url = base_url.replace("http://", "ws://", 1) + EVAL_PATH
            for scenario in scenarios:
                if audio or scenario.user_audio:  # a file may ask for audio itself (user: {modality: audio})
                    scenario = _spoken(scenario)
                # Built here, not by from_scenario: with no LLM of Brisk's to judge, that would make
                # pipecat's default judge (an Ollama server) instead of failing the criterion plainly.
                voice = tts_service_from_config(scenario.user_speech) if scenario.user_audio else None
                session = EvalScriptSession(scenario, url, params=EvalSessionParams(bot_ready_timeout_s=30),
                                            judge=judge, user_tts=voice)
                placed.clear()
                result = await session.run()
                await _ended(line)
                report = _report(scenario, result, placed[-1] if placed else None)
                reports.append(report)
                log(f"{'PASS' if report['passed'] else 'FAIL'}  {scenario.name}")
                for failure in report["failures"]:
                    log(f"      turn {failure['turn'] + 1 if failure['turn'] >= 0 else '-'}: "
                        f"{failure['event']}: {failure['reason']}")
    finally:
        if owns_runtime:
            await runtime.stop()
    passed = sum(r["passed"] for r in reports)
    return {"passed": passed, "failed": len(reports) - passed, "scenarios": reports}


async def _ended(line: EvalLine, timeout_s: float = 10.0) -> None:
    """Wait for the scenario's call to end (the harness cancels it), so the next starts alone."""
    try:
        await asyncio.wait_for(line.idle.wait(), timeout_s)
    except asyncio.TimeoutError:
        logger.warning(f"eval: {len(line.calls)} call(s) still running {timeout_s:g} s after the scenario")

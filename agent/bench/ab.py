"""``agent bench``: Brisk against stock pipecat, side by side, on the same models and transport.

    python -m agent bench [--quick] [--llm embedded|scripted|reference] [--turns N] [--business FILE] [--json PATH] [--plot PATH]
    python -m agent bench --suite faq [--llm embedded|scripted] [--turns N] [--json PATH]
    python -m agent bench --suite faq --condition web,phone,noisy,phone+noisy [--business FILE ...]
    python -m agent bench --suite turns [--turns N] [--json PATH]

One ``Runtime`` (one LLM server, one Whisper, one voice) serves three HTTP servers in this
process: stock pipecat as ``agent/call/pipeline.py`` builds it, stock pipecat tuned for speed
(``stock_tuned``: Brisk's VAD parameters, pipecat's ``SpeechTimeoutUserTurnStopStrategy`` at
Brisk's timeout, still segmented Whisper and default sentence aggregation) and Brisk as
configured by default. Each spoken turn of the business's A/B corpus (``shop.bench.yaml`` beside
the business file, read by ``agent/bench/ab_corpus.py``, rendered by ``agent/bench/corpus.py``)
is one real WebRTC call placed with the aiortc caller to each pipeline in turn (which one goes
first rotates), after one warm-up call to each. Every turn is graded (right, wrong, refused) and
tagged with the path that answered it; ``agent/bench/graded.py`` gives each side's ``graded`` and
``by_path`` and the ``ratio_llm`` over the turns Brisk's LLM answered. ``--llm reference`` puts a
capable cloud LLM's right answers and speed behind both sides (``agent/bench/reference_llm.py``).

Per turn it records: voice-to-voice latency (true end of speech, found from the WAV's samples,
to the first audible bot audio arriving at the caller), the server's latency waterfall re-based
on that same end of speech, the CPU seconds this process (and the llama.cpp server, in embedded
mode) spent during the call, and the LLM requests and tokens the turn cost, as the LLM server
counted them (``agent/bench/meters.py``). With ``--llm scripted`` the LLM is a real
OpenAI-compatible HTTP+SSE server on loopback with a fixed answer, TTFT and token rate
(``agent/bench/scripted_llm.py``), so pipeline overhead is measured apart from model speed.

A call ends (the caller hangs up) once the answer has been heard and the LLM is idle: with the
scripted LLM, 0.3 s after the first audible answer audio and once no request is in flight; with
the embedded LLM, when the server's turn record closes (the bot finished speaking). A turn is
unanswered when no audible bot audio comes within 20 s of the end of speech, or when what comes
is not an LLM answer (the apology spoken after an LLM error); unanswered turns are counted per
side and left out of the latency statistics (``agent/bench/report.py``).

After the A/B turns one more call goes to the Brisk server: the caller talks over the bot again
and again (``agent/bench/barge_in.py``), always with a scripted LLM whose answer is long; its
stop and decision times, stale frames and backchannel false interruptions go under
``brisk.barge_in`` in the JSON.

Then, without calls, two sections that measure pieces apart: per-processor overhead
(``agent/bench/overhead.py``, ``processor_overhead`` in the JSON) and the phone path's front end,
the same utterances through the VAD and streaming STT as 16 kHz PCM and as 8 kHz mu-law
(``agent/bench/phone.py``, ``phone`` in the JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

from pipecat.audio.vad.vad_analyzer import VADParams

from agent.bench import capacity, overhead, phone
from agent.bench.barge_in import BARGE_IN_METHOD, FULL_INTERRUPTIONS, QUICK_INTERRUPTIONS, run_barge_in
from agent.bench.ab_corpus import corpus_path, grade_turn, load_corpus, select_turns
from agent.bench.calls import start_rig
from agent.bench.corpus import CORPUS, WARMUP, render, select
from agent.bench.graded import by_path, format_graded, graded, path_of, ratio_llm
from agent.bench.listening import NO_ANSWER_S
from agent.bench.meters import whisper_ms
from agent.bench.plot import plot
from agent.bench.reference_llm import REFERENCE_TOKENS_PER_S, REFERENCE_TTFT_MS, REFERENCE_TTFT_SPREAD, reference_llm
from agent.bench.report import AB_FLAVORS, format_table, machine_info, summarize_side, v2v_ratios
from agent.bench.scripted_llm import DEFAULT_ANSWER, ScriptedLLM
from agent.bench.stats import fmt
from agent.caller.aiortc_caller import AUDIBLE_RMS
from agent.caller.loopback import serve_app
from agent.config import load_config
from agent.runtime.runtime import Runtime

QUICK_TURNS = 8
SCRIPTED_TTFT_MS = 300
SCRIPTED_TOKENS_PER_S = 30.0
# Spoken answers are one or two sentences; the cap only bounds a rambling small model.
EMBEDDED_MAX_TOKENS = 60


# -- the run -----------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run_bench(*, llm: str, turns: int | None, quick: bool,
                    ttft_ms: int = SCRIPTED_TTFT_MS, tokens_per_s: float = SCRIPTED_TOKENS_PER_S,
                    business: str | None = None, reference_ttft_ms: int = REFERENCE_TTFT_MS) -> dict:
    machine = machine_info()
    corpus = load_corpus(corpus_path(business))
    chosen = select_turns(corpus, turns, quick)
    clips = [render(t.utterance) for t in chosen]
    warmup = render(WARMUP)
    scripted = llm in ("scripted", "reference")
    if llm == "reference":
        scripted_llm = reference_llm(corpus, ttft_ms=reference_ttft_ms)
        # The barge-in call's scripted LLM runs at the reference's typical speed.
        ttft_ms, tokens_per_s = reference_ttft_ms, sum(REFERENCE_TOKENS_PER_S) / 2
    else:
        scripted_llm = ScriptedLLM(ttft_s=ttft_ms / 1000, tokens_per_s=tokens_per_s) if scripted else None
    overrides = {"business": business} if business else {}

    async with AsyncExitStack() as stack:
        if scripted:
            llm_url = await stack.enter_async_context(serve_app(scripted_llm.app()))
            config = load_config(llm_base_url=f"{llm_url}/v1", llm_model=llm, **overrides)
        else:
            config = load_config(llm_max_tokens=EMBEDDED_MAX_TOKENS, **overrides)
        the_business = config.business_definition
        _log(f"bench: starting the runtime ({llm} LLM) ...")
        runtime = Runtime(config)
        stack.push_async_callback(runtime.stop)
        await runtime.start()
        recorded = render(next(u for u in CORPUS if u.kind == "recorded"))
        machine["whisper_ms"] = await asyncio.to_thread(whisper_ms, runtime.resources.whisper_engine, recorded.samples)
        _log(f"bench: this machine's speed: {config.whisper_model} hears the {recorded.duration_s:.1f} s ARCTIC clip "
             f"in {machine['whisper_ms']} ms (median of 3, nothing else running)")
        rig = await start_rig(stack, config, runtime, scripted_llm, AB_FLAVORS)
        meter = rig.meter
        machine["blas_threads"] = dict(rig.blas_threads)
        _log(f"bench: numpy's BLAS threads per side: {machine['blas_threads']}")

        for flavor in AB_FLAVORS:
            warm = await rig.call(flavor, warmup)
            _log(f"bench: warm-up {flavor}: v2v {fmt(warm['v2v_ms'])} ms")

        results: list[dict] = []
        total = len(AB_FLAVORS) * len(clips)
        for i, (ab_turn, clip) in enumerate(zip(chosen, clips)):
            shift = i % len(AB_FLAVORS)
            order = AB_FLAVORS[shift:] + AB_FLAVORS[:shift]
            for flavor in order:
                turn = await rig.call(flavor, clip)
                turn["pair"] = i
                turn["order"] = len(results)
                turn["needs"] = ab_turn.needs
                turn["grade"] = grade_turn(ab_turn, turn["bot_text"] if turn["answered"] else None, the_business)
                turn["path"] = path_of(turn, the_business) if flavor == "brisk" else "llm"
                results.append(turn)
                _log(
                    f"[{len(results)}/{total}] {flavor:11} {clip.utterance.id:20} v2v {fmt(turn['v2v_ms']):>5} ms"
                    f"  {turn['grade']:9} {turn['path']:9} heard {turn['user_text']!r} -> {turn['bot_text']!r}"
                )

        # After the A/B turns, so its load never overlaps a measured turn.
        _log("bench: barge-in call (brisk, scripted LLM) ...")
        barge_in = await run_barge_in(
            config, runtime, interruptions=QUICK_INTERRUPTIONS if quick else FULL_INTERRUPTIONS,
            ttft_s=ttft_ms / 1000, tokens_per_s=tokens_per_s, log=_log,
        )

    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    by_side = {f: [t for t in results if t["side"] == f] for f in AB_FLAVORS}
    sides = {f: {**summarize_side(by_side[f]), "graded": graded(by_side[f]), "by_path": by_path(by_side[f])}
             for f in AB_FLAVORS}
    return {
        "stock": sides["stock"],
        "stock_tuned": sides["stock_tuned"],
        "brisk": {**sides["brisk"], "barge_in": barge_in},
        "ratio": v2v_ratios(results),
        "ratio_tuned": v2v_ratios(results, baseline="stock_tuned"),
        "ratio_llm": ratio_llm(results),
        "ratio_llm_tuned": ratio_llm(results, baseline="stock_tuned"),
        "turns": results,
        "machine": machine,
        "config": {
            "llm": llm,
            "llm_model": runtime.resources.llm_model if runtime.resources else None,
            "scripted": {"ttft_ms": ttft_ms, "tokens_per_s": tokens_per_s, "answer": DEFAULT_ANSWER}
            if llm == "scripted" else None,
            "reference": {"ttft_ms_median": reference_ttft_ms, "ttft": "log-normal around the median, sigma "
                          f"{REFERENCE_TTFT_SPREAD}", "tokens_per_s": list(REFERENCE_TOKENS_PER_S),
                          "answers": "the corpus turn's right answer, nearest words (agent/bench/reference_llm.py)"}
            if llm == "reference" else None,
            "business": the_business.name,
            "corpus": str(corpus_path(business)),
            "graded": "as the FAQ suite grades (agent/bench/ab_corpus.py): right, wrong (a fact the file does not "
                      "hold, or an answer to what the file cannot answer), refused (don't-know to an answerable "
                      "question); v2v_ms_right over right answers only",
            "paths": "brisk: fast_path (a fixed answer), tool (the fast path started a tool), llm; stock: llm",
            "llm_max_tokens": config.llm_max_tokens,
            "llm_threads": config.llm_server_threads if llm == "embedded" else None,
            "turns_per_side": len(clips),
            "quick": quick,
            "order": "per utterance, stock, stock_tuned and brisk back to back, rotating which goes first",
            "warmup_calls_per_side": 1,
            "barge_in": BARGE_IN_METHOD,
            "tts": config.tts_engine,
            "whisper_model": config.whisper_model,
            "vad": {
                "stock": VADParams().model_dump(),
                "stock_tuned": "as brisk",
                "brisk": {"confidence": config.vad_confidence, "start_secs": config.vad_start_secs,
                          "stop_secs": config.vad_stop_secs, "min_volume": config.vad_min_volume},
            },
            "turn_stop": {"stock": "pipecat default UserTurnStrategies (Smart Turn v3)",
                          "stock_tuned": f"pipecat SpeechTimeoutUserTurnStopStrategy, {config.turn_stop_timeout_secs} s",
                          "brisk": f"speech timeout {config.turn_stop_timeout_secs} s after the VAD stop; up to "
                                   f"{config.turn_unfinished_wait_secs} s more after unfinished words "
                                   "(processors/turns/adaptive_user_turn_stop.py)"},
            "speech_end": "end of the last 10 ms window within 40 dB of the clip's loudest (agent/audio.py)",
            "v2v": f"speech end -> first received audio chunk with RMS >= {AUDIBLE_RMS:g} at the aiortc caller",
            "answered_into_a_pause": "turns the pipeline split at a pause whose first part's answer audio "
                                     "left the server before the caller's speech ended (the bot talking "
                                     "into the pause; per turn: answers_into_a_pause)",
            "hang_up": "scripted: 0.3 s after the first answer audio, LLM idle; embedded: bot finished speaking",
            "no_answer_s": NO_ANSWER_S,
            "llm_cache": None if scripted else "before every call the llama.cpp KV cache is reset to the "
                         "system prompt (LocalLLMServer.warm), so no side inherits the other's prefill",
            "llm_tokens_source": meter.source,
            "llm_tokens": "requests: completions the pipeline's LLM service started (drafts included); "
                          "warmups: the prefix warmer's out-of-band max_tokens=1 completions; tokens as "
                          "llm_tokens_source says: 'usage' = the usage each completion reported (pipecat's "
                          "LLMUsageMetricsData; the scripted LLM counts words with their leading space) plus, "
                          "for drafts cut mid-stream, processors/speculation/speculation_stats.py's count (streamed chunks, "
                          "estimated prompt); cancelled = requests that reported no usage; 'server_metrics' = "
                          "llama-server's /metrics counters over the call; null = unknown",
            "cpu": "time.process_time() of this process (servers, caller and scripted LLM) from connect to "
                   "hang-up; llm_server: psutil user + system time of the llama.cpp server process",
        },
    }


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers of calls like 1,2,3,4, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("each level must be at least 1 call")
    return sorted(set(levels))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m agent bench",
        description="Brisk vs stock pipecat, interleaved per spoken turn over real WebRTC calls.",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_TURNS} turns with the scripted LLM (a few minutes)")
    parser.add_argument("--llm", choices=("embedded", "scripted", "reference"), default=None,
                        help="embedded: the packaged local model (default); scripted: a loopback "
                             "OpenAI-compatible server with a fixed answer (default with --quick); reference: "
                             "a loopback server giving each corpus turn its right answer at a cloud LLM's speed "
                             "(agent/bench/reference_llm.py)")
    parser.add_argument("--turns", type=int, default=None,
                        help="spoken turns per side (default: the whole corpus, or 8 with --quick)")
    parser.add_argument("--json", dest="json_path", default=None, help="write the full results as JSON here")
    parser.add_argument("--plot", dest="plot_path", default=None, help="write a PNG (waterfall + v2v CDF) here")
    parser.add_argument("--scripted-ttft-ms", type=int, default=SCRIPTED_TTFT_MS,
                        help="scripted LLM time to first token (default 300)")
    parser.add_argument("--scripted-tokens-per-s", type=float, default=SCRIPTED_TOKENS_PER_S,
                        help="scripted LLM token rate (default 30)")
    parser.add_argument("--reference-ttft-ms", type=int, default=REFERENCE_TTFT_MS,
                        help=f"--llm reference: median time to first token (default {REFERENCE_TTFT_MS})")
    parser.add_argument("--concurrency", type=_levels, default=None, metavar="1,2,3,4",
                        help="capacity instead of the A/B: that many calls at once per level, "
                             f"{capacity.QUESTIONS_PER_CALL} questions each (JSON key \"concurrency\")")
    parser.add_argument("--suite", choices=("ab", "faq", "turns", "threads", "phone", "overhead"), default="ab",
                        help="ab: Brisk vs stock on the latency corpus (default); faq: spoken questions about the "
                             "business, graded for right and wrong facts (JSON key \"faq\", agent/bench/faq.py); "
                             "turns: end-of-turn policies on the same audio, false cut-offs and delay "
                             "(JSON key \"turns\", agent/bench/turns.py); threads: the embedded LLM's speed per "
                             "thread count, alone and next to Whisper (JSON key \"threads\", agent/bench/threads.py); "
                             "phone: the phone path's front end, 8 kHz vs 16 kHz (JSON key \"phone\", agent/bench/phone.py); "
                             "overhead: per-processor microseconds per frame (JSON key \"processor_overhead\", "
                             "agent/bench/overhead.py)")
    parser.add_argument("--whisper-model", choices=("tiny.en", "base"), default=None,
                        help="--suite phone: the Whisper model (default: BRISK_WHISPER_MODEL or tiny.en)")
    parser.add_argument("--frames", type=int, default=None, help="--suite overhead: frames per measurement")
    parser.add_argument("--repeats", type=int, default=None, help="--suite overhead: measurements per case")
    parser.add_argument("--business", action="append", default=None, metavar="FILE",
                        help="the business file to ask, with its questions beside it: --suite faq reads "
                             "shop.faq.yaml (repeat for several), the A/B shop.bench.yaml (default: the shipped "
                             "Harbor Lane Bikes)")
    parser.add_argument("--questions", default=None, metavar="FILE",
                        help="--suite faq: the questions file, for one --business (default: beside the business file)")
    parser.add_argument("--condition", default=None, metavar="LIST",
                        help="--suite faq: Brisk's calls through each of these channels instead of the A/B calls, "
                             "e.g. web,phone,noisy,phone+noisy (web: 16 kHz WebRTC; phone: 8 kHz mu-law over the "
                             "Twilio media stream; +noisy / +noisy10: pink noise at 20 / 10 dB SNR; JSON key "
                             "\"conditions\", agent/bench/conditions.py); --suite turns: every utterance through "
                             "each channel (web: 16 kHz PCM; phone: 8 kHz mu-law; JSON key turns.conditions)")
    parser.add_argument("--text", action="store_true",
                        help="--suite faq: the questions as text only, no calls (a minute, not half an hour)")
    args = parser.parse_args(argv)
    if args.suite == "faq" and (args.quick or args.concurrency):
        parser.error("--suite faq takes --llm, --turns, --business, --questions, --text, --condition and --json only")
    if args.suite != "faq" and (args.questions or args.text):
        parser.error("--questions and --text are for --suite faq")
    if args.condition and args.suite not in ("faq", "turns"):
        parser.error("--condition is for --suite faq and --suite turns")
    if args.text and args.condition:
        parser.error("--text asks no calls; --condition is about the calls")
    if args.condition:
        from agent.bench.conditions import parse_conditions

        try:
            args.condition = parse_conditions(args.condition)
        except ValueError as error:
            parser.error(f"--condition: {error}")
    if args.suite not in ("faq", "ab") and args.business:
        parser.error("--business is for --suite faq and the A/B")
    if args.suite == "ab" and len(args.business or []) > 1:
        parser.error("the A/B takes one --business")
    if args.llm == "reference" and args.suite != "ab":
        parser.error("--llm reference is for the A/B (its corpus holds the right answers)")
    if args.questions and len(args.business or []) > 1:
        parser.error("--questions goes with one --business")
    if args.suite == "turns" and (args.quick or args.concurrency or args.llm):
        parser.error("--suite turns takes --turns, --condition and --json only")
    if args.suite == "threads" and (args.quick or args.concurrency or args.llm or args.turns):
        parser.error("--suite threads takes --json only")
    if args.suite == "phone" and (args.concurrency or args.llm):
        parser.error("--suite phone takes --quick, --turns, --whisper-model and --json only")
    if args.suite == "overhead" and (args.quick or args.concurrency or args.llm or args.turns):
        parser.error("--suite overhead takes --frames, --repeats and --json only")
    if args.whisper_model and args.suite != "phone":
        parser.error("--whisper-model is for --suite phone")
    if (args.frames or args.repeats) and args.suite != "overhead":
        parser.error("--frames and --repeats are for --suite overhead")
    if args.llm is None:
        args.llm = "scripted" if args.quick else "embedded"
    if args.turns is None and args.quick:
        args.turns = QUICK_TURNS
    if args.turns is not None and args.turns < 1:
        parser.error("--turns must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from loguru import logger

    # pipecat logs every call's set-up and tear-down; the table is what matters here.
    logger.remove()
    logger.add(sys.stderr, level="ERROR")

    started = time.monotonic()
    if args.concurrency:
        return _capacity_main(args, started)
    if args.suite == "faq":
        return _faq_main(args, started)
    if args.suite == "turns":
        return _turns_main(args, started)
    if args.suite == "threads":
        return _threads_main(args, started)
    if args.suite == "phone":
        return _phone_main(args, started)
    if args.suite == "overhead":
        return _overhead_main(args, started)
    result = asyncio.run(
        run_bench(llm=args.llm, turns=args.turns, quick=args.quick,
                  ttft_ms=args.scripted_ttft_ms, tokens_per_s=args.scripted_tokens_per_s,
                  business=(args.business or [None])[0], reference_ttft_ms=args.reference_ttft_ms)
    )
    result["machine"]["wall_s"] = round(time.monotonic() - started, 1)
    print(format_graded(result, AB_FLAVORS))
    print()
    print(format_table(result))
    # Per-processor overhead: seconds of work, so it runs after the calls, not between them.
    result["processor_overhead"] = asyncio.run(overhead.measure(frames=500 if args.quick else 2000))
    print()
    print(overhead.format_overhead(result["processor_overhead"]))
    # The phone path's front end (VAD + STT at 8 kHz mu-law vs 16 kHz), on the same utterances.
    result["phone"] = asyncio.run(phone.measure(select(args.turns, args.quick)))
    print()
    print(phone.format_phone(result["phone"]))
    _write_json(result, args.json_path)
    if args.plot_path:
        plot(result, args.plot_path)
        print(f"plot written to {args.plot_path}")
    return 0


def _capacity_main(args: argparse.Namespace, started: float) -> int:
    machine = machine_info()
    levels = asyncio.run(capacity.run_capacity(args.concurrency, llm=args.llm, log=_log))
    machine["wall_s"] = round(time.monotonic() - started, 1)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {"concurrency": levels, "machine": machine,
              "config": {"llm": args.llm, "questions_per_call": capacity.QUESTIONS_PER_CALL,
                         "method": capacity.__doc__.split("\n\n")[1].replace("\n", " ")}}
    print(capacity.format_capacity(levels, args.llm))
    _write_json(result, args.json_path)
    return 0


def _faq_main(args: argparse.Namespace, started: float) -> int:
    from agent.bench import faq

    machine = machine_info()
    suites = []
    for business in args.business or [None]:
        suite = asyncio.run(faq.run_faq(llm=args.llm, turns=args.turns, log=_log, business=business,
                                        questions=args.questions, text_only=args.text, conditions=args.condition))
        print(faq.format_faq(suite))
        print()
        suites.append(suite)
    machine["wall_s"] = round(time.monotonic() - started, 1)
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    # One business: its result is "faq" itself, as before; several: one per business, and a summary.
    result = suites[0] if len(suites) == 1 else {"businesses": suites}
    result["summary"] = faq.summary_by_business(suites)
    print(faq.format_summary(result["summary"]))
    _write_json({"faq": result, "machine": machine}, args.json_path)
    return 0


def _turns_main(args: argparse.Namespace, started: float) -> int:
    from agent.bench import turns

    machine = machine_info()
    suite = asyncio.run(turns.run_turns(turns=args.turns, log=_log, conditions=args.condition))
    machine["wall_s"] = round(time.monotonic() - started, 1)
    print(turns.format_turns(suite))
    _write_json({"turns": suite, "machine": machine}, args.json_path)
    return 0


def _threads_main(args: argparse.Namespace, started: float) -> int:
    from agent.bench import threads

    machine = machine_info()
    suite = asyncio.run(threads.run_threads(log=_log))
    machine["wall_s"] = round(time.monotonic() - started, 1)
    print(threads.format_threads(suite))
    _write_json({"threads": suite, "machine": machine}, args.json_path)
    return 0


def _phone_main(args: argparse.Namespace, started: float) -> int:
    overrides = {"whisper_model": args.whisper_model} if args.whisper_model else {}
    machine = machine_info()
    suite = asyncio.run(phone.measure(select(args.turns, args.quick), load_config(**overrides)))
    machine["wall_s"] = round(time.monotonic() - started, 1)
    print(phone.format_phone(suite))
    _write_json({"phone": suite, "machine": machine}, args.json_path)
    return 0


def _overhead_main(args: argparse.Namespace, started: float) -> int:
    machine = machine_info()
    suite = asyncio.run(overhead.measure(args.frames or overhead.DEFAULT_FRAMES, args.repeats or overhead.DEFAULT_REPEATS))
    machine["wall_s"] = round(time.monotonic() - started, 1)
    print(overhead.format_overhead(suite))
    _write_json({"processor_overhead": suite, "machine": machine}, args.json_path)
    return 0


def _write_json(result: dict, path: str | None):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=2))
        print(f"JSON written to {path}")

"""``agent bench --suite faq``: does the bot get a business's facts right, and how fast?

    python -m agent bench --suite faq [--llm embedded|scripted] [--turns N] [--json PATH]
    python -m agent bench --suite faq --business FILE [--business FILE ...] [--questions FILE] [--text]

Spoken questions about a business (the shipped agent/business/harbor_lane_bikes.yaml unless
``--business`` names others), read from its questions file beside it (``shop.yaml`` ->
``shop.faq.yaml``, agent/bench/faq_questions.py): in several espeak voices, worded the way callers
talk rather than like the intents' examples, some with fillers and pauses, and some the business
file does not answer. Each is one real WebRTC call to Brisk (fast path and grounded LLM) and one
to stock pipecat (the same LLM with the generated system prompt that lists every fact), back to
back, alternating which goes first, as the A/B does (``agent/bench/calls.py``).

Each answer is graded (:func:`grade`) against the facts a right answer must contain and the
ones it must not: ``correct``; ``wrong`` (a wrong fact, or an answer to a question the file
does not answer); ``dont_know`` (says it does not know and offers a person: the right answer
when the file has no fact, not wrong otherwise); ``incomplete`` (none of that); ``no_answer``.
Per side: those counts, fast-path hits, and voice-to-voice P50/P95 for fast-path answers, LLM
answers and (Brisk) speculative LLM answers.

First, without calls: the same questions as text (:func:`measure_text`, all that ``--text``
runs), which tells what the ASR costs from what the answering costs, with the path that answered
each of Brisk's (fast path, tool, LLM); and what understanding by meaning costs per turn
(:func:`measure_understanding`). After the calls: what the ASR hears of the clips
(:func:`measure_asr`): word error rate and fast-path intent agreement per Whisper model (tiny.en,
base), with and without the business vocabulary (``BRISK_STT_VOCABULARY``).

Then, for a business with the shop's tools, the agent acting (``agent/bench/tasks.py``): an order
lookup said and one keyed, a rental booked through its flow, a hand-over to a person, each one
Brisk call (JSON ``"tasks"``: success rate, v2v of each turn, fillers); and who picks a tool
right, the embedded LLM offered the tools or Brisk's intent router (``"llm_tools"``, embedded only).

Several businesses: the JSON's ``"faq"`` holds ``"businesses"`` (one result each) and
``"summary"`` (Brisk's right / wrong / don't know per business, spoken and as text).
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path

import numpy as np

from agent.bench.calls import start_rig
from agent.bench.corpus import WARMUP, render
from agent.bench.faq_questions import OUTCOMES, FaqQuestion, expectations, load_questions, questions_path
from agent.bench.report import FLAVORS
from agent.bench.stats import fmt, percentiles, word_error_rate
from agent.bench.tasks import measure_llm_tools, run_tasks
from agent.business.words import numbers_as_digits
from agent.config import load_config
from agent.runtime.runtime import Runtime

# Spoken answers are one or two sentences; the cap only bounds a rambling small model.
EMBEDDED_MAX_TOKENS = 60

_DONT_KNOW = re.compile(
    r"\b(do not know|don't know|dont know|not sure|no information|don't have (that|any) information|"
    r"can't (say|answer|help with)|cannot (say|answer)|unable to|not something i|i'm afraid i|"
    r"don't have details|do not have details)\b"
)
_OFFERS_PERSON = re.compile(r"\b(person|someone|colleague|staff|team member|human|agent|connect you|put you through)\b")

def normalize(answer: str) -> str:
    """The answer as graded: lower case, curly quotes straight, number words as digits."""
    return numbers_as_digits(answer.replace("\u2019", "'"))


def _holds(text: str, fact: str) -> bool:
    if fact.startswith("digits:"):  # a phone number, however it is grouped or spoken
        return fact.removeprefix("digits:") in re.sub(r"\D", "", text)
    return re.search(fact, text) is not None


def says_dont_know(text: str) -> bool:
    return bool(_DONT_KNOW.search(text)) and bool(_OFFERS_PERSON.search(text))


def grade(question: FaqQuestion, answer: str | None, *, now: datetime | None = None, business=None) -> str:
    """One of ``OUTCOMES`` for ``answer`` to ``question`` about ``business`` (the shipped shop
    when None; see the module docstring)."""
    if not answer or not answer.strip():
        return "no_answer"
    text = normalize(answer)
    must, must_not = expectations(question, now, business)
    if any(_holds(text, fact) for fact in must_not):
        return "wrong"
    if question.unknown:
        return "correct" if says_dont_know(text) else "wrong"
    if all(any(_holds(text, alt) for alt in group) for group in must):
        return "correct"
    if says_dont_know(text):
        return "dont_know"
    return "incomplete"


def summarize(turns: list[dict]) -> dict:
    """One side's counts and latencies."""
    counts = {outcome: sum(1 for t in turns if t["grade"] == outcome) for outcome in OUTCOMES}
    answered = [t for t in turns if t["v2v_ms"] is not None]
    fast = [t["v2v_ms"] for t in answered if t.get("fast_path")]
    llm = [t["v2v_ms"] for t in answered if not t.get("fast_path")]
    spec = [t["v2v_ms"] for t in answered if not t.get("fast_path") and t.get("speculative")]
    right = [t["v2v_ms"] for t in answered if t["grade"] == "correct"]

    return {
        "questions": len(turns),
        **counts,
        "correct_rate": round(counts["correct"] / len(turns), 3) if turns else None,
        "fast_path_hits": sum(1 for t in turns if t.get("fast_path")),
        "v2v_ms": {"fast_path": percentiles(fast), "llm": percentiles(llm), "llm_speculative": percentiles(spec),
                   "right": percentiles(right)},
    }


async def run_faq(*, llm: str, turns: int | None, log, business: str | None = None, questions: str | None = None,
                  text_only: bool = False, conditions: list | None = None) -> dict:
    """The suite for one business (the shipped shop when None) with its questions file (beside it
    when None), both sides; see the module docstring. ``text_only``: the questions as text alone;
    ``conditions`` (agent/bench/conditions.py): Brisk's calls in each of them, instead of the A/B calls."""
    questions_file = Path(questions) if questions else questions_path(business)
    asked = load_questions(questions_file)
    asked = list(asked[:turns] if turns else asked)
    scripted = llm == "scripted"
    async with AsyncExitStack() as stack:
        overrides = {"business": business} if business else {}
        if scripted:
            from agent.bench.scripted_llm import ScriptedLLM
            from agent.caller.loopback import serve_app

            scripted_llm = ScriptedLLM(ttft_s=0.3, tokens_per_s=30.0)
            llm_url = await stack.enter_async_context(serve_app(scripted_llm.app()))
            config = load_config(llm_base_url=f"{llm_url}/v1", llm_model="scripted", **overrides)
        else:
            scripted_llm = None
            config = load_config(llm_max_tokens=EMBEDDED_MAX_TOKENS, **overrides)
        log(f"faq: {config.business_definition.name}, {len(asked)} questions ({questions_file.name}); "
            f"starting the runtime ({llm} LLM) ...")
        runtime = Runtime(config)
        stack.push_async_callback(runtime.stop)
        await runtime.start()
        now = datetime.now(config.business_definition.zone)
        text = await measure_text(runtime, config, asked, now, log)
        understanding = measure_understanding(runtime, asked)
        if text_only:
            return _result(config, runtime, llm, asked, now, text=text, understanding=understanding)
        clips = [render(q.utterance) for q in asked]
        if conditions:
            from agent.bench.conditions import measure_conditions

            rig = await start_rig(stack, config, runtime, scripted_llm, ("brisk",))
            await rig.call("brisk", render(WARMUP))
            by_condition = await measure_conditions(
                conditions, asked, clips, rig, log=log,
                grade=lambda q, answer: grade(q, answer, now=now, business=config.business_definition))
            return _result(config, runtime, llm, asked, now, text=text, understanding=understanding,
                           conditions=by_condition)
        rig = await start_rig(stack, config, runtime, scripted_llm, FLAVORS)
        for flavor in FLAVORS:
            await rig.call(flavor, render(WARMUP))
        counted = runtime.resources.whisper_scheduler.counts
        before = counted.copy()

        results: list[dict] = []
        for i, (question, clip) in enumerate(zip(asked, clips)):
            for flavor in FLAVORS if i % 2 == 0 else FLAVORS[::-1]:
                turn = await rig.call(flavor, clip)
                turn["grade"] = grade(question, turn["bot_text"] if turn["answered"] else None, now=now,
                                      business=config.business_definition)
                turn["unknown"] = question.unknown
                results.append(turn)
                log(f"[{len(results)}/{2 * len(clips)}] {flavor:5} {question.id:22} {turn['grade']:10} "
                    f"v2v {fmt(turn['v2v_ms']):>5} ms  heard {turn['user_text']!r} -> {turn['bot_text']!r}")
        # What the second opinion heard again over the calls (Brisk's side; stock has its own Whisper).
        reviews = {k: v for k, v in (counted - before).items() if k.startswith("review")}
        tasks = llm_tools = None
        if {"lookup_order", "book_rental"} <= set(config.business_definition.tool_names):
            # The task scenarios are the shipped shop's (an order, a rental): a business with those tools.
            log("faq: task scenarios (tools and the booking flow) ...")
            tasks = await run_tasks(rig.sides["brisk"], runtime.resources.store, log)
            llm_tools = None if scripted else await measure_llm_tools(runtime, config, lambda: _router(config, runtime))
        scheduler = runtime.resources.whisper_scheduler
        asr = await asyncio.to_thread(measure_asr, config, asked, clips, scheduler.recognised,
                                      scheduler.about_the_business)

    by_side = {flavor: [t for t in results if t["side"] == flavor] for flavor in FLAVORS}
    return _result(config, runtime, llm, asked, now, text=text, understanding=understanding,
                   sides={flavor: summarize(by_side[flavor]) for flavor in FLAVORS}, second_opinion=reviews,
                   tasks=tasks, llm_tools=llm_tools, asr=asr, turns=results)


def _result(config, runtime, llm: str, asked: list[FaqQuestion], now: datetime, *, sides: dict | None = None,
            **parts) -> dict:
    return {
        **(sides or {}),
        **parts,
        "config": {
            "llm": llm,
            "llm_model": runtime.resources.llm_model if runtime.resources else None,
            "whisper_model": config.whisper_model,
            "noise_filter": config.noise_filter,
            "understanding": config.understanding,
            "questions": len(asked),
            "unknown_questions": sum(1 for q in asked if q.unknown),
            "business": str(config.business or "harbor_lane_bikes.yaml (shipped)"),
            "business_name": config.business_definition.name,
            "date": now.date().isoformat(),
            "grading": "wrong: a fact it must not state, or no don't-know-and-a-person for a question the "
                       "file does not answer; correct: every fact it must state; dont_know: says so and "
                       "offers a person; incomplete: none of these (agent/bench/faq.py grade)",
            "stock": "stock pipecat, same LLM, the generated system prompt with every fact; no fast path, "
                     "no retrieval",
        },
    }


def measure_understanding(runtime, questions: list[FaqQuestion]) -> dict | None:
    """What understanding by meaning costs: the model's load time and size, and the time to embed
    one caller's turn (each question once, on the calls' own BLAS thread count)."""
    embedder = runtime.resources.embedder
    if embedder is None:
        return None
    times = []
    for q in questions:
        started = time.perf_counter()
        embedder.embed([q.utterance.text])
        times.append((time.perf_counter() - started) * 1000)
    return {"model": "all-MiniLM-L6-v2", "load_ms": round(embedder.load_ms), "megabytes": round(embedder.megabytes),
            "ms_per_turn": percentiles(times)}


async def measure_text(runtime, config, questions: list[FaqQuestion], now: datetime, log=None) -> dict:
    """The same questions as text, no audio: what each side answers when nothing is misheard.

    Brisk: the fast path (the call's router, with its tools), else the LLM with the question's
    facts before it, its answer then held to them as a call holds it (``checked_answer``).
    Stock: the LLM with the system prompt alone. One request per question and side, the same
    settings as the calls. Per turn: which path answered Brisk (fast_path, tool, llm).
    """
    from processors.llm.answer_check import checked_answer

    business = config.business_definition
    router = _router(config, runtime)
    facts = router.matcher._facts
    client, model = runtime.resources.llm_client, runtime.resources.llm_model

    async def llm(messages):
        response = await client.chat.completions.create(
            model=model, messages=messages, max_tokens=config.llm_max_tokens, temperature=config.llm_temperature)
        return response.choices[0].message.content or ""

    turns = []
    for q in questions:
        asked = q.utterance.text
        system = {"role": "system", "content": config.system_prompt}
        user = {"role": "user", "content": asked}
        stock = await llm([system, user])
        fast = router(asked)
        if fast is not None and fast.tool is not None:
            brisk, path = _tool_said(fast, business), "tool"
        elif fast is not None:
            brisk, path = fast.text, "fast_path"
        else:
            answer = await llm([system, {"role": "system", "content": facts.grounding(asked)}, user])
            brisk, path = checked_answer(facts.supports, asked, answer, unsupported_text=business.unknown_answer,
                                         person_offer=business.person_offer, instead=facts.instead,
                                         lacking=facts.lacking), "llm"
        for side, answer in (("stock", stock), ("brisk", brisk)):
            outcome = grade(q, answer, now=now, business=business)
            turns.append({"utterance": q.id, "side": side, "asked": asked, "bot_text": answer, "grade": outcome,
                          "path": path if side == "brisk" else "llm",
                          "fast_path": fast.intent if side == "brisk" and fast else None})
            if log and side == "brisk":
                log(f"text {q.id:24} {outcome:10} {path:9} {asked!r} -> {answer!r}")
    return {side: {o: sum(1 for t in turns if t["side"] == side and t["grade"] == o) for o in OUTCOMES}
            for side in FLAVORS} | {"turns": turns}


def _tool_said(answer, business) -> str:
    """What a tool turn says as text, without running it: a hand-over says the transfer line, a
    goodbye the goodbye (a question that wanted a fact and got a tool is graded on that)."""
    said = {"transfer_to_human": business.transfer_text, "end_call": business.goodbye}.get(answer.tool, "")
    return f"{answer.text} {said}".strip() or f"({answer.tool})"


def measure_asr(config, questions: list[FaqQuestion], clips: list, recognised=None, about_the_business=None) -> dict:
    """WER and fast-path agreement per Whisper model, with and without the business vocabulary, and
    for the default: tiny.en with base's second opinion on the finals it is unsure of or the
    business does not recognise (``recognised``) but is about (``about_the_business``): the
    runtime's own predicates."""
    from agent.business.facts import vocabulary_of
    from agent.business.intents import IntentMatcher
    from agent.runtime.models import whisper_model_path
    from processors.stt.whisper_engine import WhisperEngine
    from processors.stt.whisper_scheduler import WhisperScheduler

    business = config.business_definition
    matcher = IntentMatcher(business)
    vocabulary = vocabulary_of(business)
    results = {}
    engines = {}
    for model in ("tiny.en", "base"):
        try:
            path = whisper_model_path(model, config.models_dir)
        except Exception as error:  # base ships in its own packages; say so rather than fail
            results[model] = {"error": str(error)}
            continue
        for with_vocabulary in (False, True):
            engines[f"{model}{' +vocabulary' if with_vocabulary else ''}"] = WhisperEngine.load(
                str(path), cpu_threads=config.whisper_threads, vocabulary=vocabulary if with_vocabulary else None)
    if "base +vocabulary" in engines:
        engines["tiny.en +vocabulary +second opinion"] = (
            engines["tiny.en +vocabulary"],
            WhisperEngine.load(str(whisper_model_path("base", config.models_dir)), cpu_threads=config.whisper_threads,
                               vocabulary=vocabulary, beam_size=config.stt_second_opinion_beam,
                               min_window_s=config.stt_second_opinion_window_secs))
    for key, engine in engines.items():
        first, second = engine if isinstance(engine, tuple) else (engine, None)
        scheduler = WhisperScheduler(first, second_opinion=second, doubt_below=config.stt_doubt_below,
                                     recognised=recognised if second is not None else None,
                                     review_unrecognised=config.stt_review_unrecognised,
                                     about_the_business=about_the_business if second is not None else None)
        wers, agree, intents_heard, reviewed = [], 0, 0, 0
        for question, clip in zip(questions, clips):
            audio = clip.samples.astype(np.float32) / 32768.0
            heard = first.transcribe(audio)
            if scheduler.doubts(heard):  # as the scheduler's review does, without its queue
                reviewed += 1
                heard = scheduler.better(heard, second.transcribe(audio))
            text = heard.transcript if heard else ""
            wers.append(word_error_rate(question.utterance.text, text))
            meant = matcher.match(question.utterance.text)
            got = matcher.match(text)
            agree += (meant and meant[0]) == (got and got[0])
            intents_heard += got is not None
        results[key] = {
            "wer": round(float(np.mean(wers)), 3),
            "intent_agreement": round(agree / len(questions), 3),
            "fast_path_matches": intents_heard,
            **({"reviewed": reviewed} if second is not None else {}),
        }
    return results


def _router(config, runtime=None):
    """A call's fast path as the pipeline builds it (agent/call/pipeline.py), without a call."""
    from agent.business.facts import FactIndex
    from agent.business.intents import IntentMatcher
    from agent.call.call_control import CallControl
    from agent.tools.functions import CallTools
    from agent.tools.router import ToolRouter

    business = config.business_definition
    embedder = getattr(runtime.resources, "embedder", None) if runtime is not None else None
    facts = FactIndex(business, limit=config.llm_fact_lines, embedder=embedder)
    return ToolRouter(IntentMatcher(business, facts=facts, hedge=config.hedges), CallTools(business, None, CallControl()))


def format_faq(result: dict) -> str:
    """The results table (docs/benchmarks.md): per side, the grades and the latencies."""
    config = result.get("config")
    filtered = f", noise filter {config['noise_filter']}" if config and config.get("noise_filter", "off") != "off" else ""
    lines = [f"{config['business_name']}: {config['questions']} questions "
             f"({config['unknown_questions']} the file does not answer{filtered})", ""] if config else []
    if "brisk" in result:
        lines += [
            "| side | questions | correct | wrong | don't know | incomplete | no answer | fast-path hits | "
            "v2v P50/P95 fast path (ms) | v2v P50/P95 LLM (ms) | v2v P50/P95 speculative LLM (ms) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    for flavor in FLAVORS if "brisk" in result else ():
        s = result[flavor]
        v = s["v2v_ms"]

        def pair(x):
            return f"{fmt(x['p50'])} / {fmt(x['p95'])} (n={x['n']})" if x["n"] else "-"

        lines.append(
            f"| {flavor} | {s['questions']} | {s['correct']} ({100 * (s['correct_rate'] or 0):.0f}%) | {s['wrong']} | "
            f"{s['dont_know']} | {s['incomplete']} | {s['no_answer']} | {s['fast_path_hits']} | "
            f"{pair(v['fast_path'])} | {pair(v['llm'])} | {pair(v['llm_speculative'])} |"
        )
    if "text" in result:
        lines += ["", "| the questions as text (no ASR) | correct | wrong | don't know | incomplete | Brisk's paths |",
                  "|---|---|---|---|---|---|"]
        for flavor in FLAVORS:
            t = result["text"][flavor]
            paths = [turn["path"] for turn in result["text"].get("turns", ()) if turn["side"] == flavor]
            said = ", ".join(f"{p} {paths.count(p)}" for p in dict.fromkeys(paths)) if flavor == "brisk" else ""
            lines.append(f"| {flavor} | {t['correct']} | {t['wrong']} | {t['dont_know']} | {t['incomplete']} | {said} |")
    if result.get("understanding"):
        u = result["understanding"]
        lines += ["", f"Understanding by meaning ({u['model']}): {u['megabytes']} MB, loaded in {u['load_ms']} ms; "
                      f"{fmt(u['ms_per_turn']['p50'])} ms per turn (P50), {fmt(u['ms_per_turn']['p95'])} (P95)."]
    if result.get("tasks"):
        tasks = result["tasks"]
        lines += ["", "| task (Brisk, spoken) | done | turns | v2v per turn (ms) | filler |", "|---|---|---|---|---|"]
        for r in tasks["scenarios"]:
            lines.append(f"| {r['task']} | {'yes' if r['success'] else 'no'} | {r['turns']} | "
                         f"{', '.join(fmt(v) for v in r['v2v_ms'])} | {r['filler_spoken']} |")
        v = tasks["tool_turn_v2v_ms"]
        lines.append(f"| all | {100 * tasks['success_rate']:.0f}% | | P50 {fmt(v['p50'])} (n={v['n']}) | {tasks['fillers']} |")
    if result.get("llm_tools"):
        t = result["llm_tools"]
        lines += ["", "| who picks the tool | right (of {0}) | as real tool calls | a call when none was needed (of {1}) |".format(
            t["requests"], t["requests"] - t["needs_a_tool"]), "|---|---|---|---|",
            f"| embedded LLM, tools offered | {t['llm']['right']} | {t['llm']['parsed_as_tool_calls']} | {t['llm']['called_when_none_needed']} |",
            f"| Brisk's intent router | {t['router']['right']} | - | {t['router']['called_when_none_needed']} |"]
    if result.get("conditions"):
        from agent.bench.conditions import format_conditions

        lines += ["", format_conditions(result["conditions"])]
    if result.get("asr"):
        lines += ["", "| ASR | WER | fast-path intent as on the true text | fast-path matches |", "|---|---|---|---|"]
    for key, asr in (result.get("asr") or {}).items():
        if "error" in asr:
            lines.append(f"| {key} | unavailable: {asr['error']} | | |")
        else:
            lines.append(f"| {key} | {asr['wer']:.3f} | {100 * asr['intent_agreement']:.0f}% | {asr['fast_path_matches']} |")
    return "\n".join(lines)


def summary_by_business(suites: list[dict]) -> dict:
    """Per business: Brisk's right / wrong / don't know, spoken (when the calls ran) and as text."""
    summary = {}
    for suite in suites:
        name = suite["config"]["business_name"]
        row = {"questions": suite["config"]["questions"], "unknown_questions": suite["config"]["unknown_questions"]}
        for source, counts in (("spoken", suite.get("brisk")), ("text", (suite.get("text") or {}).get("brisk"))):
            if counts:
                row[source] = {"right": counts["correct"], "wrong": counts["wrong"], "dont_know": counts["dont_know"],
                               "incomplete": counts["incomplete"], "no_answer": counts.get("no_answer", 0)}
                if "v2v_ms" in counts:  # spoken: how fast the right answers came, and the fast path's
                    row[source]["v2v_p50_ms"] = {path: counts["v2v_ms"][path]["p50"]
                                                 for path in ("right", "fast_path", "llm") if path in counts["v2v_ms"]}
        for condition, c in (suite.get("conditions") or {}).items():
            row.setdefault("conditions", {})[condition] = {
                "wer": c["wer"], "right": c["correct"], "wrong": c["wrong"], "dont_know": c["dont_know"],
                "v2v_p50_ms": c["v2v_p50_ms"]}
        summary[name] = row
    return summary


def format_summary(summary: dict) -> str:
    lines = ["| business (Brisk) | questions | spoken: right / wrong / don't know | text: right / wrong / don't know | "
             "spoken v2v P50, right answers / fast path (ms) |", "|---|---|---|---|---|"]
    for name, row in summary.items():
        def cell(source):
            c = row.get(source)
            return f"{c['right']} / {c['wrong']} / {c['dont_know']}" if c else "-"
        v2v = row.get("spoken", {}).get("v2v_p50_ms", {})
        speed = f"{fmt(v2v.get('right'))} / {fmt(v2v.get('fast_path'))}" if v2v else "-"
        lines.append(f"| {name} | {row['questions']} | {cell('spoken')} | {cell('text')} | {speed} |")
    by_condition = [(name, condition, c) for name, row in summary.items()
                    for condition, c in row.get("conditions", {}).items()]
    if by_condition:
        lines += ["", "| business (Brisk) | condition | WER | right / wrong / don't know | v2v P50, right answers (ms) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {name} | {condition} | {c['wer']:.1%} | {c['right']} / {c['wrong']} / {c['dont_know']} | "
                  f"{fmt(c['v2v_p50_ms']['right'])} |" for name, condition, c in by_condition]
    return "\n".join(lines)

"""The reference LLM profile (``--llm reference``): a capable cloud LLM, as seen from this machine.

Consumes the A/B corpus (``agent/bench/ab_corpus.py``); serves ``agent/bench/scripted_llm.py``'s
loopback OpenAI-compatible HTTP+SSE server, answering each request with the right answer of the
corpus turn the caller's last words are nearest to (a follow-up's first turn included), so a
draft on a partial transcript gets the answer its words are heading for, as a real model's would.
Each request waits a time to first token drawn around ``ttft_ms`` (log-normal, ``ttft_spread``
its sigma: a cloud API's spread, with a tail) and streams at a rate drawn from ``tokens_per_s``.
Both sides of the A/B use it, so what differs is the pipeline, not the model.

Words no corpus turn is near (under ``NEAR``) get the don't-know line, as a grounded model's would.
"""

from __future__ import annotations

import difflib
import random
import re

from agent.bench.ab_corpus import AbTurn
from agent.bench.scripted_llm import ScriptedLLM, last_user_text

REFERENCE_TTFT_MS = 350
REFERENCE_TTFT_SPREAD = 0.25  # sigma of the log-normal: P5-P95 about 0.66x-1.5x the median
REFERENCE_TOKENS_PER_S = (60.0, 80.0)
NEAR = 0.5
DONT_KNOW = "I'm sorry, I don't know that. Would you like me to put you through to a person?"


def _plain(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", text.lower()).strip()


def reference_answers(turns: list[AbTurn] | tuple[AbTurn, ...]) -> dict[str, str]:
    """What the caller says (each turn, and a follow-up's first turn) -> its right answer."""
    answers = {}
    for turn in turns:
        answers[_plain(turn.asked)] = turn.answer
        if turn.earlier:
            answers[_plain(turn.earlier)] = turn.earlier_answer
    return answers


def answer_for(answers: dict[str, str]):
    """``ScriptedLLM.answer_for``: the right answer of the nearest known words, else don't-know."""
    def answer(messages: list[dict]) -> str:
        heard = _plain(last_user_text(messages)).split()
        best, score = None, 0.0
        for said in answers:
            # By words, so a misheard word costs one word and no two questions share letters alone.
            ratio = difflib.SequenceMatcher(None, heard, said.split()).ratio()
            if ratio > score:
                best, score = said, ratio
        return answers[best] if best is not None and score >= NEAR else DONT_KNOW

    return answer


def reference_llm(turns, *, ttft_ms: float = REFERENCE_TTFT_MS, spread: float = REFERENCE_TTFT_SPREAD,
                  tokens_per_s: tuple[float, float] = REFERENCE_TOKENS_PER_S, seed: int = 0) -> ScriptedLLM:
    """The reference server for ``turns``; a fixed ``seed`` gives every run the same draws."""
    rng = random.Random(seed)

    def pace() -> tuple[float, float]:
        return rng.lognormvariate(0.0, spread) * ttft_ms / 1000, rng.uniform(*tokens_per_s)

    return ScriptedLLM(ttft_s=ttft_ms / 1000, tokens_per_s=sum(tokens_per_s) / 2,
                       answer_for=answer_for(reference_answers(turns)), pace=pace)

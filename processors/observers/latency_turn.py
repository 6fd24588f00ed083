"""The latency observer's turn in progress: its stages, its words, and whether more answer is due.

Consumes and emits nothing itself: ``processors/observers/latency.py`` fills it from the frames it observes
and turns it into a record when the turn closes. Measures nothing on its own.
"""


class OpenTurn:
    """What is known of the turn in progress; closed into a record by the latency observer."""

    __slots__ = (
        "n", "start_ns", "stages", "stop_secs", "user_text", "bot_text", "speculative", "withdrawn", "fast_path",
        "merged", "llm_open", "tools_open", "paused_ns", "said_since_pause",
    )

    def __init__(self, n: int, start_ns: int):
        self.n = n
        self.start_ns = start_ns
        self.stages: dict[str, int] = {}  # stage -> pipeline-clock ns of its first occurrence
        self.stop_secs = 0.0
        self.user_text: list[str] = []
        self.bot_text: list[str] = []
        self.fast_path: str | None = None  # the intent, when the answer came from the fast path
        self.speculative = False
        self.withdrawn = 0  # speculative requests withdrawn (EagerEndOfTurnCancelFrame)
        self.merged = False  # it continued the turn before (UserTurnContinuedFrame): one question
        self.llm_open = False  # an LLM response is open (its start pushed, its end not yet)
        self.tools_open = 0  # tool calls started and not settled: the answer to them is still to come
        self.paused_ns: int | None = None  # the bot stopped while the answer was still coming
        self.said_since_pause = False  # the LLM gave words after that stop: more audio is due

    def mark(self, stage: str, ts: int):
        self.stages.setdefault(stage, ts)

    @property
    def user_done(self) -> bool:
        # Past this point a new start of speech is a new turn, not the user resuming this one.
        s = self.stages
        return "turn_end" in s or "tts_first_audio" in s or "first_audio_out" in s

    @property
    def answer_due(self) -> bool:
        # More of the answer is coming: the LLM is still answering, or a tool it called is running.
        return self.llm_open or self.tools_open > 0

    @property
    def ended_at_pause(self) -> bool:
        # The bot stopped, nothing more is coming and nothing was said since: that stop was the end.
        return self.paused_ns is not None and not self.answer_due and not self.said_since_pause

    @property
    def responding(self) -> bool:
        # Bot output seen before this belongs to the previous, interrupted response.
        s = self.stages
        return "vad_stop" in s or "turn_end" in s or "llm_request" in s

"""How the latency observer sorts frames and processors: a bit set per frame class, a role per processor.

Pure classification, computed once per class (the observer caches it): which frames are
payload, which mark a stage of a turn (VAD, transcripts, context, LLM text, TTS audio, bot
speaking), and which processors are the STT, LLM, TTS, output transport or pipeline plumbing.
"""

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    ControlFrame,
    EagerEndOfTurnCancelFrame,
    EndFrame,
    FunctionCallCancelFrame,
    FunctionCallResultFrame,
    FunctionCallsStartedFrame,
    InterimTranscriptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMContextFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    SystemFrame,
    TextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.base_pipeline import BasePipeline
from pipecat.pipeline.pipeline import PipelineSink, PipelineSource
from pipecat.pipeline.sync_parallel_pipeline import (
    SyncParallelPipelineSink,
    SyncParallelPipelineSource,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_output import BaseOutputTransport

from processors.llm.answer_check import AnswerChecker

PAYLOAD = 1 << 0  # neither a SystemFrame nor a ControlFrame: text, audio out, context...
AUDIO_OUT = 1 << 1
VAD_START = 1 << 2
USER_START = 1 << 3
VAD_STOP = 1 << 4
TRANSCRIPT = 1 << 5
USER_STOP = 1 << 6
CONTEXT = 1 << 7
LLM_TEXT = 1 << 8
TTS_TEXT_IN = 1 << 9
TTS_AUDIO = 1 << 10
BOT_START = 1 << 11
BOT_STOP = 1 << 12
PIPELINE_END = 1 << 13
EAGER_CANCEL = 1 << 14
LLM_START = 1 << 15
LLM_END = 1 << 16
TTS_SPEAK = 1 << 17  # words said as they are, not the LLM's (a flow step's question)
TOOL_START = 1 << 18  # the LLM started tool calls: their answer is still to come
TOOL_END = 1 << 19  # a tool call's result (or its cancellation)
# Stages read where a frame enters its processor, and where a frame is pushed.
ENTER_KINDS = CONTEXT | EAGER_CANCEL | TTS_TEXT_IN | TTS_SPEAK
BOUNDARY_KINDS = VAD_START | USER_START | VAD_STOP | USER_STOP | BOT_STOP | PIPELINE_END
PUSH_KINDS = BOUNDARY_KINDS | TRANSCRIPT | LLM_TEXT | TTS_AUDIO | BOT_START | LLM_START | LLM_END | TOOL_START | TOOL_END

STT, LLM, TTS, OUTPUT, PLUMBING = 1, 2, 4, 8, 16
# The answer check after the LLM (processors/llm/answer_check.py): what it lets go is what is said.
CHECK = 32

# Containers and their entry/exit points: a frame crossing them is not work being done.
PIPELINE_PLUMBING = (
    BasePipeline,
    PipelineSource,
    PipelineSink,
    SyncParallelPipelineSource,
    SyncParallelPipelineSink,
)

def frame_kind(cls: type) -> int:
    kind = 0
    if not issubclass(cls, (SystemFrame, ControlFrame)):
        kind |= PAYLOAD
    checks = (
        (OutputAudioRawFrame, AUDIO_OUT),
        (VADUserStartedSpeakingFrame, VAD_START),
        (UserStartedSpeakingFrame, USER_START),
        (VADUserStoppedSpeakingFrame, VAD_STOP),
        (TranscriptionFrame, TRANSCRIPT),
        (UserStoppedSpeakingFrame, USER_STOP),
        (LLMContextFrame, CONTEXT),
        (LLMTextFrame, LLM_TEXT),
        (TTSAudioRawFrame, TTS_AUDIO),
        (BotStartedSpeakingFrame, BOT_START),
        (BotStoppedSpeakingFrame, BOT_STOP),
        ((EndFrame, CancelFrame), PIPELINE_END),
        (EagerEndOfTurnCancelFrame, EAGER_CANCEL),
        (LLMFullResponseStartFrame, LLM_START),
        (LLMFullResponseEndFrame, LLM_END),
        (TTSSpeakFrame, TTS_SPEAK),
        (FunctionCallsStartedFrame, TOOL_START),
        ((FunctionCallResultFrame, FunctionCallCancelFrame), TOOL_END),
    )
    for base, bit in checks:
        if issubclass(cls, base):
            kind |= bit
    if issubclass(cls, TextFrame) and not issubclass(
        cls, (TranscriptionFrame, InterimTranscriptionFrame)
    ):
        kind |= TTS_TEXT_IN
    return kind


def processor_role(processor: FrameProcessor) -> int:
    for cls, role in (
        (STTService, STT),
        (LLMService, LLM),
        (AnswerChecker, CHECK),
        (TTSService, TTS),
        (BaseOutputTransport, OUTPUT),
        (PIPELINE_PLUMBING, PLUMBING),
    ):
        if isinstance(processor, cls):
            return role
    return 0

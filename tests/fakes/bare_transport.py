"""The smallest transport a call builder accepts: pipecat's own base input and output processors.

Nothing is sent or received; tests build a call on it to look at its processors.
"""

from pipecat.transports.base_transport import TransportParams


class LoopbackTransport:
    """The smallest transport build_call accepts: pipecat's own base input/output processors."""

    def __init__(self):
        from pipecat.transports.base_input import BaseInputTransport
        from pipecat.transports.base_output import BaseOutputTransport

        params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
        self._input = BaseInputTransport(params)
        self._output = BaseOutputTransport(params)

    def input(self):
        return self._input

    def output(self):
        return self._output

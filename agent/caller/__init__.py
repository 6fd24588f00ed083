"""A real WebRTC caller (aiortc) and ``agent call``: one call from a WAV, measured at the caller.

``agent call`` is a user command, and the benches and tests dial with the same caller, so it
lives here rather than under ``agent/bench/`` (which nothing outside the benches imports).
"""

"""Text to speech: sentence-first chunking and the voices (embedded hibari, espeak-ng, Cartesia)."""

"""Speech to text: streaming faster-whisper with partial transcripts, one engine shared by every call."""

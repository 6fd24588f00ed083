"""Speculative drafts: stable partials start an LLM draft and its first audio, committed or cancelled at turn end."""

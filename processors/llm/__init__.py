"""The LLM stage: the OpenAI-compatible service, its prompt and cache, grounding facts and the answer check."""

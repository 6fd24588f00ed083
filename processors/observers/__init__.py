"""Observers: per-processor latency and each turn's waterfall, measured from frame events."""

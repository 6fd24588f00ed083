"""Barge-in: who may cut the bot off, and nothing of a cut turn heard, shown or remembered."""

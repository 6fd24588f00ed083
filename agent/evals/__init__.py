"""Scenario evals: a business tests its own bot with pipecat.evals (``python -m agent eval``)."""

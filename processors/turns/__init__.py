"""User turn strategies (pipecat keeps one per file under pipecat/turns/) and what they decide on."""

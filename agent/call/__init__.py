"""One call: its pipeline assembled, its turns and conversation, its admission, control and lifecycle."""

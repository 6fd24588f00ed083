"""``python -m agent``: the command line (agent/cli.py)."""

from agent.cli import main

raise SystemExit(main())

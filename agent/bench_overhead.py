"""``python -m agent.bench_overhead``: the documented command; the bench itself is agent/bench/overhead.py."""

from agent.bench.overhead import main

if __name__ == "__main__":
    raise SystemExit(main())

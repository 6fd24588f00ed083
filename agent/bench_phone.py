"""``python -m agent.bench_phone``: the documented command; the bench itself is agent/bench/phone.py."""

from agent.bench.phone import main

if __name__ == "__main__":
    raise SystemExit(main())

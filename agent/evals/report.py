"""What ``python -m agent eval`` writes: its results as JSON, and as JUnit XML for a CI to show.

Consumes the runner's result (agent/evals/runner.py): ``{"passed", "failed", "scenarios"}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree


def write_json(result: dict, path: str) -> None:
    Path(path).write_text(json.dumps(result, indent=2) + "\n")


def write_junit(result: dict, path: str) -> None:
    """One test suite, one test case per scenario; a failed scenario's failures as its message."""
    suite = ElementTree.Element("testsuite", name="brisk-evals", tests=str(len(result["scenarios"])),
                                failures=str(result["failed"]))
    for scenario in result["scenarios"]:
        case = ElementTree.SubElement(suite, "testcase", classname="brisk.eval", name=scenario["name"],
                                      time=f"{(scenario.get('duration_ms') or 0) / 1000:.3f}")
        if not scenario["passed"]:
            lines = [f"turn {f['turn'] + 1}: {f['event']}: {f['reason']}" for f in scenario["failures"]]
            failure = ElementTree.SubElement(case, "failure", message=lines[0] if lines else "failed")
            failure.text = "\n".join(lines)
    ElementTree.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)

"""The README stays a short guide and the docs/ pages stay true: generated config, live links.

docs/configuration.md is the generator's output (agent/config_docs.py), so a setting added or
changed in agent/config.py without ``python -m agent config-docs`` fails here, not in a reader's
hands.
"""

import re
from pathlib import Path

import pytest

from agent.config_docs import COMMAND, PAGE, render

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target); a target with a scheme or a bare #anchor is not a file.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_configuration_page_is_the_generators_output():
    assert PAGE.exists() and PAGE.read_text() == render(), f"docs/configuration.md is stale: run `{COMMAND}`"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if not path or "://" in path or path.startswith("mailto:"):
            continue
        if not (page.parent / path).exists():
            broken.append(target)
    assert broken == [], f"{page.name} links to missing files"


def test_the_readme_is_a_short_guide():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= 300, f"README.md has {lines} lines: move detail to docs/"


def test_the_docs_point_at_nothing_outside_the_project():
    for page in PAGES:
        text = page.read_text()
        assert "latency-playbook" not in text and "shared/design" not in text, page.name

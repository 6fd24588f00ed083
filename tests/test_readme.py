"""The docs name every setting, and the README the commands issues and CI rely on."""

from pathlib import Path

from agent.config import BriskConfig

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()


def test_every_config_option_is_documented_in_the_configuration_page():
    names = [f"BRISK_{name.upper()}" for name in BriskConfig.model_fields]
    missing = [name for name in names if name not in CONFIGURATION]
    assert not missing, f"docs/configuration.md lacks {missing}: run `python -m agent config-docs`"


def test_the_readme_shows_the_two_commands():
    assert "make run" in README and "make test" in README

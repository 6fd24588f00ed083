"""The README documents every setting and the commands issues and CI rely on."""

from pathlib import Path

from agent.config import BriskConfig

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_config_option_is_documented_in_the_readme():
    missing = [f"BRISK_{name.upper()}" for name in BriskConfig.model_fields if f"BRISK_{name.upper()}" not in README]
    assert not missing, f"README.md lacks {missing}"


def test_the_readme_shows_the_two_commands():
    assert "make run" in README and "make test" in README

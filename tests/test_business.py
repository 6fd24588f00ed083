"""The business as data: the shipped example loads, the prompt is generated from it byte for byte
the same, and a malformed file stops start-up with one message naming the field."""

from pathlib import Path

import pytest
import yaml

from agent.business.model import BusinessError, default_business_path, load_business
from agent.business.prompt import opening_hours, spoken_time, system_prompt
from agent.config import ConfigError, load_config

EXAMPLE = yaml.safe_load(default_business_path().read_text())


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "business.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_the_shipped_example_is_harbor_lane_bikes_closed_on_sunday():
    business = load_business()
    assert business.name == "Harbor Lane Bikes"
    assert business.hours["sunday"] is None
    assert business.hours["saturday"].opens.hour == 10 and business.hours["saturday"].closes.hour == 16
    assert business.zone.key == "Europe/London"


def test_the_prompt_holds_every_fact_of_the_file_and_is_the_same_bytes_every_time():
    prompt = system_prompt(load_business())
    assert prompt == system_prompt(load_business())
    for fact in ("42 Harbor Lane", "555 0142", "45 dollars", "closed on Sunday", "within 30 days",
                 "free over 75 dollars", "Saturday 10 in the morning to 4 in the afternoon"):
        assert fact in prompt
    # The example sentence the small model used to repeat as an answer is gone.
    assert "open until six today" not in prompt


def test_hours_are_said_the_way_people_say_them_and_runs_of_days_are_joined():
    from datetime import time

    assert [spoken_time(t) for t in (time(9), time(12), time(17, 30), time(8, 15))] == [
        "9 in the morning", "noon", "half past 5 in the evening", "8 15 in the morning",
    ]
    assert opening_hours(load_business()) == (
        "Monday to Friday 9 in the morning to 6 in the evening; "
        "Saturday 10 in the morning to 4 in the afternoon; closed on Sunday"
    )


@pytest.mark.parametrize(
    "change, field",
    [
        ({"hours": {**EXAMPLE["hours"], "saturday": "10-4"}}, "hours.saturday"),
        ({"hours": {k: v for k, v in EXAMPLE["hours"].items() if k != "sunday"}}, "hours: every weekday"),
        ({"hours": {**EXAMPLE["hours"], "friday": "18:00-09:00"}}, "hours.friday: closes"),
        ({"timezone": "Mars/Olympus"}, "timezone: unknown time zone"),
        ({"name": ""}, "name:"),
        ({"opening": "9 to 5"}, "opening: not a field"),
        ({"greeting": None}, "greeting:"),
    ],
    ids=["bad-hours", "missing-day", "closes-before-opening", "bad-zone", "empty-name", "unknown-field", "no-greeting"],
)
def test_a_malformed_business_file_is_refused_naming_the_field(tmp_path, change, field):
    path = write(tmp_path, {**EXAMPLE, **change})
    with pytest.raises(BusinessError, match=f"^business file {path}: .*") as error:
        load_business(path)
    assert field in str(error.value)


def test_broken_yaml_and_a_missing_file_are_refused_with_where(tmp_path):
    with pytest.raises(BusinessError, match="line 2: not valid YAML"):
        load_business(write(tmp_path, "name: a\n  bad: [indent\n"))
    with pytest.raises(BusinessError, match="cannot be read"):
        load_business(tmp_path / "nowhere.yaml")


def test_brisk_business_points_the_agent_at_another_business_and_its_facts(tmp_path, monkeypatch):
    path = write(tmp_path, {**EXAMPLE, "name": "Dockside Cycles", "phone": "555 0199"})
    monkeypatch.setenv("BRISK_BUSINESS", str(path))
    config = load_config()
    assert config.business_definition.name == "Dockside Cycles"
    assert "Dockside Cycles" in config.system_prompt and "555 0199" in config.system_prompt


def test_a_malformed_business_file_stops_start_up_with_one_clear_message(tmp_path):
    path = write(tmp_path, {**EXAMPLE, "hours": {**EXAMPLE["hours"], "monday": "nine to five"}})
    with pytest.raises(ConfigError) as error:
        load_config(business=path)
    assert str(path) in str(error.value) and "hours.monday" in str(error.value) and "BRISK_BUSINESS" in str(error.value)


def test_an_explicit_system_prompt_still_wins_over_the_generated_one():
    assert load_config(system_prompt="Be brief.").system_prompt == "Be brief."

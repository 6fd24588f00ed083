"""``BRISK_NOISE_FILTER``: one filter per call, made from the setting, and a clear error at start
when its package is missing. Its effect on a real phone call: tests/test_twilio.py."""

import sys

import pytest
from pipecat.audio.filters.rnnoise_filter import RNNoiseFilter

from agent.call.stages import check_noise_filter, make_noise_filter
from agent.config import ConfigError, load_config
from agent.runtime.models import ModelError
from agent.transports.livekit import livekit_transport


def test_off_by_default_and_with_rnnoise_every_call_gets_a_filter_of_its_own():
    assert load_config().noise_filter == "off" and make_noise_filter(load_config()) is None
    config = load_config(noise_filter="rnnoise")
    first, second = make_noise_filter(config), make_noise_filter(config)
    assert isinstance(first, RNNoiseFilter) and first is not second


def test_a_livekit_room_takes_the_calls_filter_on_its_input():
    audio_filter = make_noise_filter(load_config(noise_filter="rnnoise"))
    transport = livekit_transport("wss://livekit.invalid", "token", "support-42", audio_filter)
    assert transport._params.audio_in_filter is audio_filter


def test_a_filter_whose_package_is_missing_fails_at_start_with_the_install_command(monkeypatch):
    check_noise_filter(load_config(noise_filter="rnnoise"))  # installed: nothing to say
    monkeypatch.setitem(sys.modules, "pyrnnoise", None)  # import now raises ImportError
    with pytest.raises(ModelError, match=r"pip install 'pipecat-ai\[rnnoise\]==1.14.0'"):
        check_noise_filter(load_config(noise_filter="rnnoise"))
    check_noise_filter(load_config())  # off: the package is not needed


def test_an_unknown_filter_is_refused_by_the_settings():
    with pytest.raises(ConfigError, match="BRISK_NOISE_FILTER"):
        load_config(noise_filter="krisp")

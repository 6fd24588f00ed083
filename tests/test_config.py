import pytest

from agent.config import ConfigError, load_config


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env file
    for key in list(__import__("os").environ):
        if key.startswith("BRISK_"):
            monkeypatch.delenv(key)


def test_defaults_run_everything_embedded():
    config = load_config()
    assert config.embedded_llm
    assert config.tts_engine == "hibari"
    assert config.whisper_model == "tiny.en"
    assert config.ice_servers == []  # offline: no public STUN server
    assert "Harbor Lane Bikes" in config.system_prompt


def test_env_vars_with_the_brisk_prefix_override_defaults(monkeypatch):
    monkeypatch.setenv("BRISK_PORT", "9001")
    monkeypatch.setenv("BRISK_WHISPER_MODEL", "base")
    monkeypatch.setenv("BRISK_ICE_SERVERS", '["stun:stun.example.org:3478"]')
    config = load_config()
    assert config.port == 9001
    assert config.whisper_model == "base"
    assert config.ice_servers == ["stun:stun.example.org:3478"]


def test_an_openai_compatible_base_url_switches_the_llm_to_that_provider(monkeypatch):
    monkeypatch.setenv("BRISK_LLM_BASE_URL", "https://api.groq.example/v1")
    monkeypatch.setenv("BRISK_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("BRISK_LLM_MODEL", "llama-3.1-8b")
    config = load_config()
    assert not config.embedded_llm
    assert config.llm_model == "llama-3.1-8b"


def test_a_cartesia_key_switches_tts_to_cartesia(monkeypatch):
    monkeypatch.setenv("BRISK_CARTESIA_API_KEY", "ck-test")
    assert load_config().tts_engine == "cartesia"


@pytest.mark.parametrize(
    "env, complaint",
    [
        ({"BRISK_LLM_BASE_URL": "https://x.example/v1"}, "BRISK_LLM_MODEL"),
        ({"BRISK_LLM_MODEL": "gpt-4o"}, "BRISK_LLM_BASE_URL"),
        ({"BRISK_TTS": "cartesia"}, "BRISK_CARTESIA_API_KEY"),
        ({"BRISK_PORT": "not-a-port"}, "BRISK_PORT"),
        ({"BRISK_WHISPER_MODEL": "large-v3"}, "BRISK_WHISPER_MODEL"),
        ({"BRISK_LOG_LEVEL": "LOUD"}, "BRISK_LOG_LEVEL"),
    ],
)
def test_wrong_settings_give_one_clear_error_naming_the_setting(monkeypatch, env, complaint):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as err:
        load_config()
    assert complaint in str(err.value)
    assert "Traceback" not in str(err.value)


def test_the_cli_reports_a_config_error_without_a_stack_trace(monkeypatch, capsys):
    from agent.cli import main

    monkeypatch.setenv("BRISK_PORT", "0")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid Brisk configuration")
    assert "BRISK_PORT" in err


def test_the_llm_server_gets_half_the_cores_unless_told(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(2)))
    assert load_config().llm_server_threads == 1
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))
    assert load_config().llm_server_threads == 4
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert load_config().llm_server_threads == 1
    assert load_config(llm_threads=2).llm_server_threads == 2


def test_numpy_blas_runs_on_the_configured_thread_count_once_the_runtime_limits_it():
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    from agent.runtime.runtime import limit_blas_threads

    assert load_config().blas_threads == 1
    before = {info["filepath"]: info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
    assert before, "numpy loaded no BLAS library to limit"
    try:
        limited = limit_blas_threads(1)
        assert {info["filepath"] for info in limited} == set(before)
        assert all(info["num_threads"] == 1 for info in limited)
        a = np.arange(6.0).reshape(2, 3)
        assert (a @ a.T).tolist() == [[5.0, 14.0], [14.0, 50.0]]  # still computes
    finally:
        threadpool_limits(limits=max(before.values()), user_api="blas")  # as numpy started, for the tests after

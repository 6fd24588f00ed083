"""docker-compose.yml: it validates, has every service the deployment needs, takes every
setting from the environment, and what it runs is Brisk's CLI with a valid Brisk config.

``docker-compose config`` validates and resolves the file offline (no Docker engine needed);
where the docker-compose client is not installed these tests are skipped.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agent.cli import build_parser
from agent.config import load_config

REPO = Path(__file__).resolve().parent.parent
COMPOSE = shutil.which("docker-compose")

pytestmark = pytest.mark.skipif(
    COMPOSE is None, reason="docker-compose is not installed: docker-compose.yml was not validated"
)


# The secrets a deployment must choose: the file has no defaults for them.
SECRETS = {"LIVEKIT_API_KEY": "lk-key", "LIVEKIT_API_SECRET": "lk-secret", "BRISK_API_KEY": "api-key",
           "BRISK_OPERATOR_KEY": "operator-key"}


def compose(*args: str, env: dict[str, str] | None = None, secrets: bool = True) -> subprocess.CompletedProcess:
    # Only PATH and HOME from this shell: the defaults in the file are what is checked.
    clean = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    if secrets:
        clean.update(SECRETS)
    return subprocess.run(
        [COMPOSE, "-f", "docker-compose.yml", "--profile", "gpu", "--profile", "cpu", *args],
        cwd=REPO,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def resolved(**env: str) -> dict:
    result = compose("config", env=env)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_the_compose_file_validates():
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_the_compose_file_has_no_default_secrets_and_names_the_one_missing(missing):
    env = {name: value for name, value in SECRETS.items() if name != missing}
    result = compose("config", "-q", env=env, secrets=False)
    assert result.returncode != 0
    assert missing in result.stderr


def test_livekit_workers_a_shared_llm_per_profile_and_prometheus_are_defined():
    services = resolved()["services"]

    assert {"livekit", "agent", "server", "llm-gpu", "llm-cpu", "prometheus"} <= set(services)
    assert "--dev" in services["livekit"]["command"]
    agent = services["agent"]
    assert agent["command"] == ["python", "-m", "agent", "livekit-worker"]
    assert agent["build"]["context"] == str(REPO)
    assert agent["deploy"]["replicas"] == 2
    assert agent["environment"]["BRISK_LLM_BASE_URL"] == "http://llm:8000/v1"
    assert agent["environment"]["BRISK_LIVEKIT_URL"] == "ws://livekit:7880"
    gpu, cpu = services["llm-gpu"], services["llm-cpu"]
    assert gpu["profiles"] == ["gpu"] and cpu["profiles"] == ["cpu"]
    assert "--enable-prefix-caching" in gpu["command"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert "vllm" in gpu["image"] and "llama.cpp" in cpu["image"]
    for llm in (gpu, cpu):
        assert "llm" in llm["networks"]["default"]["aliases"]
        assert "8000" in llm["command"]


def test_every_setting_comes_from_the_environment():
    services = resolved(
        BRISK_WORKERS="7",
        BRISK_LLM_MODEL="my-model",
        BRISK_VLLM_MODEL="org/bigger-model",
        LIVEKIT_API_KEY="key1",
        LIVEKIT_API_SECRET="secret1",
        BRISK_LIVEKIT_LOAD_THRESHOLD="0.5",
        BRISK_TWILIO_AUTH_TOKEN="tw-token",
        PROMETHEUS_PORT="9999",
    )["services"]

    agent = services["agent"]
    assert agent["deploy"]["replicas"] == 7
    assert agent["environment"]["BRISK_LLM_MODEL"] == "my-model"
    assert agent["environment"]["BRISK_LIVEKIT_API_KEY"] == "key1"
    assert agent["environment"]["BRISK_LIVEKIT_API_SECRET"] == "secret1"
    assert agent["environment"]["BRISK_LIVEKIT_LOAD_THRESHOLD"] == "0.5"
    assert services["server"]["environment"]["BRISK_TWILIO_AUTH_TOKEN"] == "tw-token"
    assert services["livekit"]["environment"]["LIVEKIT_KEYS"] == "key1: secret1"
    gpu = services["llm-gpu"]["command"]
    assert gpu[gpu.index("--model") + 1] == "org/bigger-model"
    assert gpu[gpu.index("--served-model-name") + 1] == "my-model"
    cpu = services["llm-cpu"]["command"]
    assert cpu[cpu.index("--alias") + 1] == "my-model"
    assert [p["published"] for p in services["prometheus"]["ports"]] == [9999]


@pytest.mark.parametrize("service", ["agent", "server"])
def test_the_brisk_services_environment_is_a_valid_brisk_config(service, monkeypatch):
    environment = resolved()["services"][service]["environment"]
    for name in [n for n in os.environ if n.startswith("BRISK_")]:
        monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, str(value))

    config = load_config()

    assert config.llm_base_url == "http://llm:8000/v1" and not config.embedded_llm
    assert config.livekit_url == "ws://livekit:7880"
    assert config.host == "0.0.0.0"
    assert not config.otlp_endpoint and not config.twilio_auth_token
    assert config.api_key == "api-key" and not config.calls_open  # reachable from elsewhere: closed


def test_the_services_run_brisk_cli_commands():
    services = resolved()["services"]
    parser = build_parser()
    for name in ("agent", "server", "llm-models"):
        command = services[name]["command"]
        assert command[:3] == ["python", "-m", "agent"], name
        parser.parse_args(command[3:])  # exits (fails the test) on an unknown command


def test_prometheus_scrapes_every_worker_and_the_server_where_they_serve_metrics():
    services = resolved()["services"]
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    port = int(services["agent"]["environment"]["BRISK_PORT"])

    workers = jobs["brisk-agent"]
    assert workers["metrics_path"] == "/metrics"
    [discovery] = workers["dns_sd_configs"]
    assert discovery["names"] == ["agent"] and discovery["port"] == port
    server = jobs["brisk-server"]
    assert server["static_configs"][0]["targets"] == [f"server:{int(services['server']['environment']['BRISK_PORT'])}"]
    assert f"{REPO}/deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in services["prometheus"]["volumes"]


def test_prometheus_scrapes_with_the_operator_key_that_metrics_require():
    services = resolved()["services"]
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    files = {job["authorization"]["credentials_file"] for job in prometheus["scrape_configs"]
             if job["authorization"]["type"] == "Bearer"}
    assert len(files) == 1 and len(prometheus["scrape_configs"]) == 2
    service = services["prometheus"]
    assert service["environment"]["BRISK_OPERATOR_KEY"] == SECRETS["BRISK_OPERATOR_KEY"]
    start = " ".join(service["entrypoint"])
    # The key is written where the scrape reads it, then Prometheus runs with the mounted config.
    assert f'BRISK_OPERATOR_KEY" > {files.pop()}' in start and "--config.file=/etc/prometheus/prometheus.yml" in start
    for name in ("agent", "server"):
        assert services[name]["environment"]["BRISK_OPERATOR_KEY"] == SECRETS["BRISK_OPERATOR_KEY"]

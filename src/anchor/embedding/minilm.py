"""all-MiniLM-L6-v2 in numpy: the bundled weights read with ``safetensors``, text cut into word
pieces with ``tokenizers``.

Why not sentence-transformers: importing it (and torch under it) costs about seven seconds of CPU in
every process that embeds, for a six-layer encoder that is a few dozen matrix products. Here the
model loads in a few tenths of a second, with no set-up step and no exported artefact, and gives
sentence-transformers' vectors to within 3e-7 per component (``tests/embedding/test_minilm.py`` compares
the two on texts from one to 300 word pieces).

The forward pass is BERT's: word + position + segment embeddings, six post-norm layers of
twelve-head self-attention and an exact (erf) GELU feed-forward, then the mean over tokens and
unit length, as the folder's ``1_Pooling`` and ``2_Normalize`` modules say. Texts are encoded in
groups of equal token length, so there is no padding and no attention mask. Every product is a
stacked ``matmul`` (one BLAS call per text), never one product over the whole group's rows: BLAS
may choose its kernel and blocking by the number of rows (OpenBLAS does on AMD EPYC, 5e-5 apart),
so only a product of the same shape gives the same bits. A text's vector is then the same bits
whatever else is encoded with it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anchor.errors import ConfigurationError

_LAYER = "encoder.layer.{}."
_LOADED: dict[str, MiniLM] = {}
_LOADED_LOCK = threading.Lock()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


class MiniLM:
    """A BERT-style sentence encoder with mean pooling, read from a sentence-transformers folder."""

    def __init__(self, folder: Path | str) -> None:
        # The Rust tokenizer's thread pool buys nothing on short texts, and a process forked after
        # it ran prints a warning (the helper processes are started by fork and exec).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from safetensors import safe_open
        from scipy.special import erf  # numpy has no erf; BERT's GELU is the exact one
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        folder = Path(folder)
        config = _read_json(folder / "config.json")
        pooling = _read_json(folder / "1_Pooling" / "config.json")
        modules = _read_json(folder / "modules.json")
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ConfigurationError(f"{folder}: not a BERT model with GELU activations")
        if not pooling.get("pooling_mode_mean_tokens") or any(
                pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                         "pooling_mode_mean_sqrt_len_tokens")):
            raise ConfigurationError(f"{folder}: only mean pooling is supported")
        self.normalise = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
        self.max_seq_length = int(_read_json(folder / "sentence_bert_config.json")["max_seq_length"])
        self.dim = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self._erf = erf
        # One BLAS thread per product: these products are small, and on a busy two-core machine a
        # two-thread team cost twenty times the CPU of one thread (0.3 s against 13 ms for a short
        # text) waiting for its second thread. Limiting through a ready controller costs microseconds.
        self._blas = ThreadpoolController()
        # Two tokenizers from one file: one cuts model input at the model's limit, the other counts
        # the word pieces of a whole text (for chunking long ones).
        self._input = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._input.no_padding()
        self._input.enable_truncation(self.max_seq_length)
        self._pieces = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._pieces.no_padding()
        self._pieces.no_truncation()

        with safe_open(str(folder / "model.safetensors"), "np") as f:
            w = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has keys(), not iteration
        self._words = w["embeddings.word_embeddings.weight"]
        self._positions = w["embeddings.position_embeddings.weight"]
        self._segment = w["embeddings.token_type_embeddings.weight"][0]
        self._embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = _LAYER.format(i)

            def g(name: str, p: str = p) -> np.ndarray:
                return w[p + name]

            # Weights transposed once (x @ W.T is what torch's Linear computes); query, key and
            # value fused into one product.
            self._layers.append((
                np.ascontiguousarray(np.concatenate([g(f"attention.self.{n}.weight") for n in ("query", "key", "value")]).T),
                np.concatenate([g(f"attention.self.{n}.bias") for n in ("query", "key", "value")]),
                np.ascontiguousarray(g("attention.output.dense.weight").T), g("attention.output.dense.bias"),
                (g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias")),
                np.ascontiguousarray(g("intermediate.dense.weight").T), g("intermediate.dense.bias"),
                np.ascontiguousarray(g("output.dense.weight").T), g("output.dense.bias"),
                (g("output.LayerNorm.weight"), g("output.LayerNorm.bias")),
            ))

    # ------------------------------------------------------------------ text

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Model input per text: [CLS] word pieces [SEP], cut at ``max_seq_length``."""
        return [e.ids for e in self._input.encode_batch(list(texts))]

    def word_pieces(self, text: str) -> tuple[list[tuple[int, int]], list[int | None]]:
        """Character offsets and word index of every word piece of the whole text (no special tokens)."""
        enc = self._pieces.encode(text, add_special_tokens=False)
        return list(enc.offsets), list(enc.word_ids)

    # ------------------------------------------------------------------ vectors

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """float32 vectors (unit length), one row per text, in input order."""
        ids = self.token_ids(texts)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        groups: dict[int, list[int]] = {}
        for i, row in enumerate(ids):
            groups.setdefault(len(row), []).append(i)
        with self._blas.limit(limits=1, user_api="blas"):
            for members in groups.values():
                for start in range(0, len(members), batch_size):
                    rows = members[start:start + batch_size]
                    out[rows] = self.forward(np.array([ids[i] for i in rows], dtype=np.int64))
        return out

    def forward(self, ids: np.ndarray) -> np.ndarray:
        """Pooled vectors of a ``(batch, tokens)`` array of token ids (all rows the same length)."""
        batch, tokens = ids.shape
        heads, dim = self.heads, self.dim
        head_dim = dim // heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        # x stays (batch, tokens, dim): np.matmul of a stack makes one product per text.
        x = self._words[ids] + self._positions[:tokens] + self._segment
        x = _layer_norm(x, *self._embed_norm, self.eps)
        for qkv_w, qkv_b, out_w, out_b, norm1, up_w, up_b, down_w, down_b, norm2 in self._layers:
            qkv = (np.matmul(x, qkv_w) + qkv_b).reshape(batch, tokens, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = (np.ascontiguousarray(qkv[j]) for j in range(3))  # (batch, heads, tokens, head_dim)
            scores = np.matmul(q, np.ascontiguousarray(k.transpose(0, 1, 3, 2))) * scale
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            attended = np.ascontiguousarray(np.matmul(scores, v).transpose(0, 2, 1, 3)).reshape(batch, tokens, dim)
            x = _layer_norm(np.matmul(attended, out_w) + out_b + x, *norm1, self.eps)
            h = np.matmul(x, up_w) + up_b
            h = h * (np.float32(0.5) * (np.float32(1.0) + self._erf(h * np.float32(1.0 / np.sqrt(2.0)))))
            x = _layer_norm(np.matmul(h, down_w) + down_b + x, *norm2, self.eps)
        pooled = x.mean(axis=1)
        if self.normalise:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.where(norms == 0, 1, norms)
        return pooled.astype(np.float32)


def load(folder: Path | str) -> MiniLM:
    """The model in ``folder``, loaded once per process."""
    key = str(Path(folder).resolve())
    with _LOADED_LOCK:
        model = _LOADED.get(key)
        if model is None:
            model = _LOADED[key] = MiniLM(folder)
        return model

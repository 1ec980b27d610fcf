"""Independent reference for late chunking and long late chunking (Jina AI, arXiv:2409.04701).

This module is the yardstick poolq's engine is tested against, so it is deliberately plain: Hugging Face
``AutoTokenizer``/``AutoModel`` in fp32 on the CPU, eager attention, ``eval()`` and ``torch.no_grad()``, one
sequence at a time, no padding, no packing. It imports nothing from poolq.

Conventions (poolq follows the same ones):

* **Tokenization.** The whole text is tokenized once, *with* the model's special tokens (``[CLS] ... [SEP]`` for
  BERT) and without truncation. Token indices everywhere refer to this full sequence of ``n`` ids.
* **Late chunking** (``n <= window_tokens``): one forward pass over all ``n`` ids; token state ``i`` is the last
  hidden state of id ``i``.
* **Long late chunking** (``n > window_tokens``), as in Jina's ``_embed_with_overlap``: macro windows are raw
  slices ``ids[s : min(s + window, n)]`` of the full sequence at ``s = 0, stride, 2*stride, ...`` with
  ``stride = window - overlap``. No special tokens are added to any window: ``[CLS]`` only appears at the start of
  the first window and ``[SEP]`` only at the end of the last, because that is where they sit in the full
  sequence. Every window runs on its own (attention mask all ones, token type ids 0, position ids from 0 in every
  window). The first window keeps all its states; every later window drops its first ``overlap`` states. The kept
  states are concatenated, so each of the ``n`` tokens has exactly one state: token ``t`` gets its state from the
  first window whose kept range contains it (window 0 keeps ``[0, window)``, window ``k >= 1`` keeps
  ``[k*stride + overlap, min(k*stride + window, n))``).
  The last window is simply shorter (it is not shifted back to be full). Jina's loop also runs trailing windows
  that start after the previous window already reached ``n``; their kept part is empty, so stopping at the first
  window that reaches ``n`` (as done here) gives identical states.
* **Chunk spans** are half-open ``(start, end)`` indices into the full sequence, special tokens included. The
  first chunk includes the leading special tokens (``[CLS]``), the last chunk includes the trailing ones
  (``[SEP]``), like Jina's ``_extend_special_tokens``; spans from :func:`fixed_token_spans` tile ``[0, n)``.
* **Chunk embedding** = fp32 mean of the token states in its span, then (by default) L2 normalization. (Jina's
  ``chunked_pooling`` returns the plain mean; their evaluation normalizes afterwards.)
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer


@functools.lru_cache(maxsize=4)
def load(model_dir) -> tuple:
    """(tokenizer, model) for ``model_dir``: fp32, CPU, eager attention, eval mode. Cached per directory."""
    model_dir = str(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model = model.to("cpu").eval()
    return tokenizer, model


def tokenize(model_dir, text: str) -> tuple[np.ndarray, list[tuple[int, int]], np.ndarray]:
    """Whole-text tokenization with special tokens and no truncation.

    Returns ``(input_ids [n] int64, offsets [(char_start, char_end)] per token, special_mask [n] bool)``.
    Special tokens have offsets ``(0, 0)``.
    """
    tokenizer, _ = load(model_dir)
    enc = tokenizer(text, add_special_tokens=True, truncation=False, return_offsets_mapping=True,
                    return_special_tokens_mask=True, verbose=False)
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
    special = np.asarray(enc["special_tokens_mask"], dtype=bool)
    return ids, offsets, special


def special_token_counts(model_dir, text: str = "a") -> tuple[int, int]:
    """(leading, trailing) number of special tokens the tokenizer puts around ``text`` (BERT: (1, 1)).

    ``text`` must produce at least one content token (otherwise leading and trailing cannot be told apart).
    """
    _, _, special = tokenize(model_dir, text)
    content = np.flatnonzero(~special)
    if content.size == 0:
        raise ValueError("text has no content tokens")
    return int(content[0]), int(len(special) - 1 - content[-1])


def macro_windows(num_tokens: int, window_tokens: int, overlap: int) -> list[tuple[int, int, int]]:
    """Macro windows of long late chunking as ``(start, end, keep_from)`` triples.

    The window covers ids ``[start, end)``; its states ``[keep_from, end)`` (absolute indices) are kept.
    ``keep_from`` is ``start`` for the first window and ``start + overlap`` for the others. The kept ranges
    tile ``[0, num_tokens)``. A single window ``(0, n, 0)`` when ``num_tokens <= window_tokens``.
    """
    if window_tokens < 1:
        raise ValueError(f"window_tokens must be >= 1, got {window_tokens}")
    if not 0 <= overlap < window_tokens:
        raise ValueError(f"overlap must be in [0, window_tokens), got {overlap} (window {window_tokens})")
    if num_tokens <= window_tokens:
        return [(0, num_tokens, 0)]
    stride = window_tokens - overlap
    windows = []
    for start in range(0, num_tokens, stride):
        end = min(start + window_tokens, num_tokens)
        windows.append((start, end, start if start == 0 else start + overlap))
        if end == num_tokens:
            break
    return windows


@torch.no_grad()
def _forward(model, ids: np.ndarray) -> torch.Tensor:
    """Last hidden states [len, hidden] (fp32) of one unpadded sequence, positions from 0."""
    input_ids = torch.as_tensor(ids, dtype=torch.long).unsqueeze(0)
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if getattr(model.config, "type_vocab_size", 0):
        inputs["token_type_ids"] = torch.zeros_like(input_ids)
    out = model(**inputs)
    return out.last_hidden_state[0].to(torch.float32)


def forward_states(model_dir, ids: Sequence[int]) -> np.ndarray:
    """Plain forward of ``ids`` exactly as given (no special tokens added): states [len, hidden] float32."""
    _, model = load(model_dir)
    return _forward(model, np.asarray(ids, dtype=np.int64)).numpy()


def token_states(model_dir, text: str, window_tokens: int | None = None, overlap: int = 0
                 ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Contextual token states of the whole document (late chunking; long late chunking past the window).

    ``window_tokens`` defaults to the model's position limit (``config.max_position_embeddings``, capped by the
    tokenizer's ``model_max_length``). Returns ``(input_ids [n] int64, states [n, hidden] float32, offsets)``
    where ``offsets[i] = (char_start, char_end)`` of token ``i`` (``(0, 0)`` for special tokens).
    """
    tokenizer, model = load(model_dir)
    if window_tokens is None:
        window_tokens = int(model.config.max_position_embeddings)
        if 0 < tokenizer.model_max_length < window_tokens:
            window_tokens = int(tokenizer.model_max_length)
    ids, offsets, _ = tokenize(model_dir, text)
    n = len(ids)
    kept = []
    for start, end, keep_from in macro_windows(n, window_tokens, overlap):
        states = _forward(model, ids[start:end])
        kept.append(states[keep_from - start:])
    states = torch.cat(kept, dim=0).numpy()
    assert states.shape[0] == n, (states.shape, n)
    return ids, states, offsets


def pool_spans(states: np.ndarray, token_spans: Sequence[tuple[int, int]], normalize: bool = True
               ) -> np.ndarray:
    """Mean of ``states[start:end]`` per span (fp32), then L2 normalization. [num_chunks, hidden] float32."""
    states = np.asarray(states, dtype=np.float32)
    n = states.shape[0]
    out = np.empty((len(token_spans), states.shape[1]), dtype=np.float32)
    for i, (start, end) in enumerate(token_spans):
        if not 0 <= start < end <= n:
            raise ValueError(f"span {i} = ({start}, {end}) is empty or outside [0, {n})")
        out[i] = states[start:end].mean(axis=0, dtype=np.float32)
    if normalize:
        out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def late_chunk_embeddings(model_dir, text: str, token_spans: Sequence[tuple[int, int]],
                          window_tokens: int | None = None, overlap: int = 0, normalize: bool = True
                          ) -> np.ndarray:
    """Late-chunked embeddings [num_chunks, hidden] float32 of ``text`` for ``token_spans``.

    Spans index the full token sequence, special tokens included (the caller puts ``[CLS]`` into the first
    chunk and ``[SEP]`` into the last one; :func:`fixed_token_spans` does).
    """
    _, states, _ = token_states(model_dir, text, window_tokens, overlap)
    return pool_spans(states, token_spans, normalize=normalize)


def fixed_token_spans(num_tokens: int, chunk_tokens: int, n_leading: int = 1, n_trailing: int = 1
                      ) -> list[tuple[int, int]]:
    """Fixed-size chunk spans over a full sequence of ``num_tokens`` ids, special tokens included.

    The content tokens are ``[n_leading, num_tokens - n_trailing)`` (BERT: 1 leading ``[CLS]``, 1 trailing
    ``[SEP]``). They are cut into consecutive, non-overlapping pieces of ``chunk_tokens`` content tokens, the
    last piece holding the remainder (it may be shorter; one under a quarter of ``chunk_tokens`` shares the
    last two pieces' tokens evenly, the first of them taking the odd one). Then the leading special tokens are attached to the
    first span (its start becomes 0) and the trailing ones to the last span (its end becomes ``num_tokens``),
    as Jina's ``chunk_by_tokens`` + ``_extend_special_tokens`` do. The spans therefore tile ``[0, num_tokens)``
    exactly; the first span has ``chunk_tokens + n_leading`` tokens (unless it is also the last).
    With no content tokens at all, a single span ``(0, num_tokens)``.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    first, stop = n_leading, num_tokens - n_trailing
    if stop <= first:
        return [(0, num_tokens)]
    spans = [(s, min(s + chunk_tokens, stop)) for s in range(first, stop, chunk_tokens)]
    if len(spans) > 1 and 4 * (spans[-1][1] - spans[-1][0]) < chunk_tokens:  # no sliver: the last two share evenly
        start = spans[-2][0]
        middle = start + (stop - start + 1) // 2
        spans[-2:] = [(start, middle), (middle, stop)]
    spans[0] = (0, spans[0][1])
    spans[-1] = (spans[-1][0], num_tokens)
    return spans


def chunked_reference(per_window_vectors, window_token_counts, normalize: bool = True) -> np.ndarray:
    """vLLM-style chunked processing: combine per-window pooled vectors into one document vector.

    ``sum_j n_j * e_j / sum_j n_j`` in float64 (``e_j`` used as given, e.g. each window's mean-pooled, not
    normalized vector; ``n_j`` its token count), then L2 normalization. Returns float64 [hidden].
    """
    vectors = np.asarray(per_window_vectors, dtype=np.float64)
    counts = np.asarray(window_token_counts, dtype=np.float64)
    if vectors.ndim != 2 or counts.shape != (vectors.shape[0],):
        raise ValueError(f"need [k, hidden] vectors and k counts, got {vectors.shape} and {counts.shape}")
    if np.any(counts <= 0):
        raise ValueError("window token counts must be positive")
    combined = (counts[:, None] * vectors).sum(axis=0) / counts.sum()
    if normalize:
        combined = combined / np.linalg.norm(combined)
    return combined


def load_long_documents(path=None) -> list[dict]:
    """The real long test documents (``tests/data/long_documents.jsonl``): dicts with id, title, text, source."""
    import json
    from pathlib import Path

    path = Path(path) if path is not None else Path(__file__).resolve().parents[2] / "data" / "long_documents.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]

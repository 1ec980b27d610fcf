"""`poolq bench families`: long documents through the families users pick, poolq packed beside
sentence-transformers padded (not a test).

Seeded random-weight models (random_families.py), built from transformers' config classes and saved by
sentence-transformers itself (Transformer + Pooling + Normalize), at their real models' layer shapes by
default: ModernBERT (hidden 768, 12 layers, mean pooling) and Qwen3 (hidden 1024, 28 layers, last-token
pooling), both with a WordPiece tokenizer of a small vocabulary trained on the demo corpus, ``[CLS] text [SEP]``.
The documents are cut from the corpus' text at the lengths asked (one ~8k and three short by default):
sentence-transformers sorts by length and pads each batch, so a short one batched with a long one pads.
poolq runs ``PoolingEngine.embed`` (packed runner, TRUNCATE at 8,192 tokens), sentence-transformers
``encode(texts, batch_size=...)`` (padded: it unpads only with flash attention), each in every dtype asked.
Each round runs every (system, dtype) once; the two systems of a dtype back to back, which goes first
alternating, because a shared machine's speed drifts. Reported: medians, the median of per-round ratios,
tokens/s of real tokens; the per-vector cosine between the systems after centring on sentence-transformers'
batch mean (random weights make raw vectors nearly parallel); the largest RSS growth during a call.
"""
from __future__ import annotations

import datetime
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import version
from pathlib import Path

import numpy as np

from poolq.devtools.bench.families.random_families import WINDOW, Family, build_model, documents, train_tokenizer
from poolq.devtools.bench.rss_peak import RssPeak
from poolq.devtools.bench.variants import Encode

# Every model here is built on this machine: a hub lookup could only stall an offline one. Set before
# transformers is imported (huggingface_hub reads it once); the forked tokenizer warning is noise here.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_LENGTHS = (8000, 1000, 500, 250)  # tokens per document, specials included
DTYPES = ("float32", "float16", "bfloat16", "auto")  # what both systems can compute in (int8 is poolq's alone)
POOLQ, ST = "poolq packed", "ST padded"


class InvalidRun(ValueError):
    """What was asked cannot run: each problem named."""


@dataclass
class Measured:
    """One (system, dtype) of one family: seconds and peak RSS growth per round, its last vectors."""

    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))


def run_families(families: Sequence[Family], *, lengths: Sequence[int] = DEFAULT_LENGTHS,
                 dtypes: Sequence[str] = ("float32", "auto"), rounds: int = 3, batch_size: int = 2,
                 threads: int | None = None, vocab: int = 8192, progress: Callable[[str], None] = lambda line: None) -> dict:
    """One report: the machine, the date, the versions, and one row per (family, dtype)."""
    _check_run(families, lengths, dtypes, rounds, batch_size)  # before torch loads: a refusal comes at once
    import torch
    import transformers

    from poolq.devtools.bench.machine import machine_facts
    from poolq.engine.device.hardware import resolve_dtype

    if threads:
        torch.set_num_threads(threads)
    resolved = list(dict.fromkeys(resolve_dtype(d, "cpu") for d in dtypes))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        train_tokenizer(Path(scratch), vocab)
        texts = documents(transformers.AutoTokenizer.from_pretrained(scratch), tuple(lengths))
        for family in families:
            rows += run_family(family, Path(scratch), texts, dtypes=resolved, rounds=rounds, batch_size=batch_size,
                               progress=progress)
    return {"date": datetime.date.today().isoformat(), "machine": machine_facts(), "auto_dtype": resolve_dtype("auto", "cpu"),
            "threads": torch.get_num_threads(), "rounds": rounds, "batch_size": batch_size, "lengths": list(lengths),
            "vocab": vocab, "dtypes": resolved,
            "versions": {name: version(name) for name in ("torch", "transformers", "sentence-transformers")}, "rows": rows}


def _check_run(families: Sequence[Family], lengths: Sequence[int], dtypes: Sequence[str], rounds: int,
               batch_size: int) -> None:
    problems = [message for failed, message in (
        (not families, "no families to run"),
        # centring on the batch mean leaves one vector nothing: its cosine would be 0/0
        (len(lengths) < 2, f"{len(lengths)} length(s): the centred cosines need at least 2 documents"),
        (rounds < 1, f"rounds {rounds}: at least 1"), (batch_size < 1, f"batch size {batch_size}: at least 1")) if failed]
    problems += [f"length {n}: each document must be 3..{WINDOW} tokens" for n in lengths if not 3 <= n <= WINDOW]
    problems += [f"dtype {d!r}: one of {', '.join(DTYPES)}" for d in dtypes if d not in DTYPES]
    if problems:
        raise InvalidRun("poolq bench families: " + "; ".join(problems))


def run_family(family: Family, tokenizer_dir: Path, texts: list[str], *, dtypes: list[str], rounds: int,
               batch_size: int, progress: Callable[[str], None] = lambda line: None) -> list[dict]:
    """One row per dtype: tokens/s of each system (medians), the median per-round ratio, cosines, peak RSS."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    counts = [min(len(ids), WINDOW) for ids in tokenizer(texts)["input_ids"]]
    tokens, padded = sum(counts), st_positions(counts, [len(text) for text in texts], batch_size)
    progress(f"{family.name}, {family.layers} layers: {tokens:,} tokens, {padded:,} positions as sentence-transformers "
             "batches them")
    with tempfile.TemporaryDirectory() as scratch:
        encode = encoders(build_model(family, tokenizer_dir, Path(scratch)), dtypes, batch_size, progress)
        results = measure(encode, texts, rounds, progress)
    rows = []
    for dtype in dtypes:
        ours, theirs = results[POOLQ, dtype], results[ST, dtype]
        cosines = centred_cosines(ours.vectors, theirs.vectors)
        ratios = [t / o for o, t in zip(ours.seconds, theirs.seconds)]
        rows.append({
            "family": family.name, "layers": family.layers, "hidden": family.config["hidden_size"], "dtype": dtype,
            "texts": len(texts), "tokens": tokens, "st_positions": padded,
            "poolq_tok_s": tokens / statistics.median(ours.seconds), "st_tok_s": tokens / statistics.median(theirs.seconds),
            "ratio": statistics.median(ratios), "ratios": ratios,
            "min_centred_cosine": float(cosines.min()), "mean_centred_cosine": float(cosines.mean()),
            **reference_cosines(results, dtype),
            "poolq_peak_mb": max(ours.peak_mb), "st_peak_mb": max(theirs.peak_mb),
        })
    return rows


def encoders(model_dir: Path, dtypes: list[str], batch_size: int,
             progress: Callable[[str], None]) -> dict[tuple[str, str], Encode]:
    """``(system, dtype) -> encode(texts) -> [n, d]`` for poolq (packed) and sentence-transformers, each dtype."""
    from sentence_transformers import SentenceTransformer

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine
    from poolq.engine.runners.packed_runner import PackedRunner
    from poolq.engine.runners.runner import torch_dtype

    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=WINDOW)
    found: dict[tuple[str, str], Encode] = {}
    for dtype in dtypes:
        engine = PoolingEngine.from_pretrained(str(model_dir), dtype=dtype)
        if not isinstance(engine.runner, PackedRunner):
            raise RuntimeError(f"{model_dir}: the engine chose {type(engine.runner).__name__}, not the packed runner")
        st = SentenceTransformer(str(model_dir), device="cpu").to(torch_dtype(engine.config.dtype))
        if st[0].can_flatten_inputs:  # flash attention's varlen path: then it pads nothing either
            progress(f"  note: sentence-transformers runs {dtype} unpadded here")
        found[POOLQ, dtype] = partial(_poolq_encode, engine, policy)
        found[ST, dtype] = partial(_st_encode, st, batch_size)
    return found


def _poolq_encode(engine, policy, texts: list[str]) -> np.ndarray:
    return np.asarray(engine.embed(texts, policy=policy))


def _st_encode(st, batch_size: int, texts: list[str]) -> np.ndarray:
    return st.encode(texts, batch_size=batch_size, convert_to_tensor=True).float().numpy()  # numpy has no bf16


def measure(encode: dict[tuple[str, str], Encode], texts: list[str], rounds: int,
            progress: Callable[[str], None] = lambda line: None) -> dict[tuple[str, str], Measured]:
    """Every round runs each encoder once on all ``texts``. The two systems of a dtype run back to back
    (a per-round ratio compares neighbours in time), which goes first alternates, and so do the dtypes."""
    keys = list(encode)  # (poolq, dtype), (ST, dtype) for each dtype
    for key in keys:
        encode[key](texts[-1:])  # warm-up: lazy initialisation, first-call kernels
    results = {key: Measured() for key in keys}
    for r in range(rounds):
        for key in round_order(keys, r):
            with RssPeak() as rss:
                start = time.perf_counter()
                vectors = encode[key](texts)
                results[key].seconds.append(time.perf_counter() - start)
            results[key].peak_mb.append(rss.peak_mb)
            results[key].vectors = np.asarray(vectors, dtype=np.float32)
        progress(f"  round {r + 1}: " + ", ".join(f"{' '.join(k)} {results[k].seconds[-1]:.1f}s" for k in keys))
    return results


def round_order(keys: list, r: int) -> list:
    """``keys`` taken as adjacent pairs: the pairs rotated by ``r``, each pair reversed in odd rounds."""
    pairs = [keys[i: i + 2] for i in range(0, len(keys), 2)]
    pairs = pairs[r % len(pairs):] + pairs[: r % len(pairs)]
    return [key for pair in pairs for key in (pair[::-1] if r % 2 else pair)]


def st_positions(token_counts: list[int], char_lengths: list[int], batch_size: int) -> int:
    """Positions sentence-transformers computes, padding included: its encode sorts by text length
    (characters, longest first) and pads each batch to its longest."""
    order = sorted(range(len(token_counts)), key=lambda i: -char_lengths[i])
    batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    return sum(len(batch) * max(token_counts[i] for i in batch) for batch in batches)


def centred_cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per-row cosine after centring both on ``theirs``' mean."""
    mean = theirs.mean(0, keepdims=True)
    a, b = ours - mean, theirs - mean
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def reference_cosines(results: dict[tuple[str, str], Measured], dtype: str) -> dict[str, float]:
    """Each system's lowest centred cosine to sentence-transformers float32 (where it ran): what the dtype
    itself costs, beside which the two systems' disagreement in that dtype can be judged."""
    reference = results.get((ST, "float32"))
    if reference is None:
        return {}
    return {f"{system}_min_cos_to_st_fp32": float(centred_cosines(results[name, dtype].vectors, reference.vectors).min())
            for system, name in (("poolq", POOLQ), ("st", ST))}

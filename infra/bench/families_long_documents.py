"""Long documents through the families users pick: poolq packed beside sentence-transformers (not a test).

Two seeded random-weight models, built from transformers' config classes and saved by
sentence-transformers itself (Transformer + Pooling + Normalize), at their real models' layer shapes:

- ModernBERT (hidden 768, 12 heads, intermediate 1152, global attention every 3rd layer, local window
  128, 8,192 positions; 12 layers, ``--modernbert-layers``, default 6: the same 1:2 global:local mix), mean pooling;
- Qwen3 (hidden 1024, 16 heads, 8 K/V heads, head size 128, intermediate 3072, 8,192 positions; 28
  layers in Qwen3-Embedding-0.6B, ``--qwen3-layers``, default 4), last-token pooling.

Fewer layers by default keep a run near 10 minutes on 2 cores; the ratio is per layer much the same.
Both share a WordPiece tokenizer (vocabulary 8,192) trained here on the demo corpus, ``[CLS] text [SEP]``.
The documents are cut from the corpus' text, repeated, at ``--lengths`` tokens (one ~8k, three short
by default): sentence-transformers sorts by length and pads each batch, so a short one batched with a
long one pads. poolq runs ``PoolingEngine.embed`` (packed runner, TRUNCATE at 8,192 tokens),
sentence-transformers ``encode(texts, batch_size=...)`` (padded: it unpads only with flash attention),
both in float32 and in the machine's ``auto`` dtype. Each round runs every (system, dtype) once; the two
systems of a dtype back to back, which goes first alternating, because a shared machine's speed
drifts. Reported: medians, the median of per-round ratios, tokens/s of real tokens; the per-vector
cosine between the systems after centring on sentence-transformers' batch mean (random weights make
raw vectors nearly parallel); the largest RSS growth during a call, sampled every 5 ms.

    python infra/bench/families_long_documents.py [--rounds 3] [--threads 2] [--batch-size 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from random_families import FAMILIES, WINDOW, Family, build_model, documents, train_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_LENGTHS = (8000, 1000, 500, 250)  # tokens per document, specials included
Encode = Callable[[list[str]], np.ndarray]  # texts -> [n, d]


@dataclass
class Measured:
    """One (system, dtype) of one family: seconds and peak RSS growth per round, its last vectors."""

    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))


class RssPeak:
    """The largest growth of this process' RSS over its value at entry, sampled while the block runs."""

    def __init__(self) -> None:
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._stop = threading.Event()
        self.peak_mb = 0.0

    def _rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self._page

    def _sample(self, start: int) -> None:
        while not self._stop.wait(0.005):
            self.peak_mb = max(self.peak_mb, (self._rss() - start) / 2**20)

    def __enter__(self) -> "RssPeak":
        self._thread = threading.Thread(target=self._sample, args=(self._rss(),), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def encoders(model_dir: Path, dtypes: list[str], batch_size: int) -> dict[tuple[str, str], Encode]:
    """``(system, dtype) -> encode(texts) -> [n, d]`` for poolq (packed) and sentence-transformers, each dtype."""
    from sentence_transformers import SentenceTransformer

    from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine
    from poolq.engine.packed_runner import PackedRunner
    from poolq.engine.runner import torch_dtype

    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=WINDOW)
    found: dict[tuple[str, str], Encode] = {}
    for dtype in dtypes:
        engine = PoolingEngine.from_pretrained(str(model_dir), dtype=dtype)
        if not isinstance(engine.runner, PackedRunner):
            raise RuntimeError(f"{model_dir}: the engine chose {type(engine.runner).__name__}, not the packed runner")
        st = SentenceTransformer(str(model_dir), device="cpu").to(torch_dtype(engine.config.dtype))
        if st[0].can_flatten_inputs:  # flash attention's varlen path: then it pads nothing either
            print(f"  note: sentence-transformers runs {dtype} unpadded here")
        found["poolq packed", dtype] = partial(_poolq_encode, engine, policy)
        found["ST padded", dtype] = partial(_st_encode, st, batch_size)
    return found


def _poolq_encode(engine, policy, texts: list[str]) -> np.ndarray:
    return np.asarray(engine.embed(texts, policy=policy))


def _st_encode(st, batch_size: int, texts: list[str]) -> np.ndarray:
    return st.encode(texts, batch_size=batch_size, convert_to_tensor=True).float().numpy()  # numpy has no bf16


def measure(encode: dict[tuple[str, str], Encode], texts: list[str], rounds: int) -> dict[tuple[str, str], Measured]:
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
        print(f"  round {r + 1}: " + ", ".join(f"{' '.join(k)} {results[k].seconds[-1]:.1f}s" for k in keys), flush=True)
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


def run_family(family: Family, tokenizer_dir: Path, texts: list[str], *, dtypes: list[str], rounds: int,
               batch_size: int) -> list[dict]:
    """One row per dtype: tokens/s of each system (medians), the median per-round ratio, cosines, peak RSS."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    counts = [min(len(ids), WINDOW) for ids in tokenizer(texts)["input_ids"]]
    tokens, padded = sum(counts), st_positions(counts, [len(text) for text in texts], batch_size)
    print(f"{family.name}, {family.config['num_hidden_layers']} layers: {tokens:,} tokens, "
          f"{padded:,} positions as sentence-transformers batches them", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        encode = encoders(build_model(family, tokenizer_dir, Path(scratch)), dtypes, batch_size)
        results = measure(encode, texts, rounds)
    rows = []
    for dtype in dtypes:
        ours, theirs = results["poolq packed", dtype], results["ST padded", dtype]
        cosines = centred_cosines(ours.vectors, theirs.vectors)
        rows.append({
            "family": family.name, "layers": family.config["num_hidden_layers"], "dtype": dtype, "texts": len(texts),
            "tokens": tokens, "st_positions": padded, "poolq_tok_s": tokens / statistics.median(ours.seconds),
            "st_tok_s": tokens / statistics.median(theirs.seconds),
            "ratio": statistics.median(t / o for o, t in zip(ours.seconds, theirs.seconds)),
            "ratios": [t / o for o, t in zip(ours.seconds, theirs.seconds)],
            "min_centred_cosine": float(cosines.min()), "mean_centred_cosine": float(cosines.mean()),
            **reference_cosines(results, dtype),
            "poolq_peak_mb": max(ours.peak_mb), "st_peak_mb": max(theirs.peak_mb),
        })
    return rows


def reference_cosines(results: dict[tuple[str, str], Measured], dtype: str) -> dict[str, float]:
    """Each system's lowest centred cosine to sentence-transformers float32 (where it ran): what the dtype
    itself costs, beside which the two systems' disagreement in that dtype can be judged."""
    reference = results.get(("ST padded", "float32"))
    if reference is None:
        return {}
    return {f"{system}_min_cos_to_st_fp32": float(centred_cosines(results[name, dtype].vectors, reference.vectors).min())
            for system, name in (("poolq", "poolq packed"), ("st", "ST padded"))}


def markdown(rows: list[dict]) -> str:
    lines = ["| family | dtype | tokens (ST's positions) | poolq tok/s | ST tok/s | ratio | per round | cos poolq-ST "
             "| cos poolq/ST to ST fp32 | RSS growth poolq/ST MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        to_fp32 = "/".join(f"{row[k]:.5f}" for k in ("poolq_min_cos_to_st_fp32", "st_min_cos_to_st_fp32") if k in row)
        lines.append(f"| {row['family']} ({row['layers']} layers) | {row['dtype']} | {row['tokens']:,} ({row['st_positions']:,}) "
                     f"| {row['poolq_tok_s']:,.0f} | {row['st_tok_s']:,.0f} | **{row['ratio']:.2f}×** "
                     f"| {', '.join(f'{r:.2f}' for r in row['ratios'])} | {row['min_centred_cosine']:.5f} | {to_fp32 or '-'} "
                     f"| {row['poolq_peak_mb']:,.0f} / {row['st_peak_mb']:,.0f} |")
    return "\n".join(lines)


def _lengths(value: str) -> tuple[int, ...]:
    try:
        lengths = tuple(int(n) for n in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated token counts, got {value!r}") from None
    if not all(3 <= n <= WINDOW for n in lengths):
        raise argparse.ArgumentTypeError(f"each length must be 3..{WINDOW} tokens, got {value!r}")
    return lengths


def _families(value: str) -> list[str]:
    unknown = [name for name in value.split(",") if name not in FAMILIES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; known: {', '.join(FAMILIES)}")
    return value.split(",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2, help="sentence-transformers' encode batch size")
    parser.add_argument("--lengths", type=_lengths, default=DEFAULT_LENGTHS, help="tokens per document, comma-separated")
    parser.add_argument("--modernbert-layers", type=int, default=6)
    parser.add_argument("--qwen3-layers", type=int, default=4)
    parser.add_argument("--families", type=_families, default=list(FAMILIES))
    parser.add_argument("--dtypes", default="float32,auto")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    import torch
    import transformers

    from poolq.engine.hardware import cpu_model, noted_flags, resolve_dtype

    torch.set_num_threads(args.threads)
    dtypes = list(dict.fromkeys(resolve_dtype(d, "cpu") for d in args.dtypes.split(",")))
    layers = {"modernbert": args.modernbert_layers, "qwen3": args.qwen3_layers}
    print(f"{datetime.date.today()}; {cpu_model()}; flags: {', '.join(noted_flags()) or 'none noted'}; "
          f"{os.cpu_count()} logical cores, torch threads {args.threads}; dtypes {', '.join(dtypes)}; "
          f"ST batch size {args.batch_size}; documents of {', '.join(map(str, args.lengths))} tokens")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        train_tokenizer(Path(scratch), args.vocab)
        texts = documents(transformers.AutoTokenizer.from_pretrained(scratch), args.lengths)
        for name in args.families:
            family = FAMILIES[name].with_config(num_hidden_layers=layers[name])
            rows += run_family(family, Path(scratch), texts, dtypes=dtypes, rounds=args.rounds, batch_size=args.batch_size)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

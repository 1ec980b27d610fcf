"""The dry-run estimate's cost against the job's, and its accuracy: one process, the local store.

Writes a mixed-length JSONL corpus cut from the demo corpus's real text (log-uniform lengths, a
share of repeated documents), estimates it (``estimate_job``: the streaming pass plus the sampled
tokenization), then runs the job in process and prints, as one JSON line: each side's seconds,
the estimate's peak Python memory (tracemalloc), tokens and rows estimated and counted, and their
relative errors. ``--skip-job`` times the estimate alone (a big corpus: its memory stays bounded);
``--quick`` is a smoke run of a few hundred documents.

    python infra/bench/estimate_cost.py --documents 20000 --mode naive_chunks
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "devtools" / "demo" / "sample_corpus.jsonl"


def write_corpus(path: Path, documents: int, repeat_share: float, most_words: float, seed: int = 3) -> int:
    words = " ".join(json.loads(line)["text"] for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines()
                     if line.strip()).split()
    rng = random.Random(seed)
    kept: list[str] = []  # a bounded pool of earlier texts to repeat
    with path.open("w", encoding="utf-8") as handle:
        for index in range(documents):
            if kept and rng.random() < repeat_share:
                text = rng.choice(kept)
            else:
                length = int(2 ** rng.uniform(1, most_words))
                start = rng.randrange(len(words) - length)
                text = " ".join(words[start:start + length])
                if len(kept) < 10_000:
                    kept.append(text)
            handle.write(json.dumps({"id": f"doc-{index:09d}", "text": text}) + "\n")
    return path.stat().st_size


def measure(documents: int, mode: str, chunk_tokens: int, root: Path, skip_job: bool, most_words: float) -> dict:
    from poolq.jobs import JobHandle
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.products.estimate.estimator import estimate_job
    from poolq.worker.local_runner import local_context, run_job_locally

    corpus = root / "corpus.jsonl"
    size = write_corpus(corpus, documents, repeat_share=0.2, most_words=most_words)
    long_documents: dict = {"mode": mode}
    if mode in ("naive_chunks", "late_chunks"):
        long_documents["chunk_tokens"] = chunk_tokens
    spec = JobSpec.model_validate({"input": {"uri": corpus.as_uri()}, "long_documents": long_documents})
    ctx = local_context(root / "out", Settings(shard_max_documents=5000))
    tracemalloc.start()
    started = time.perf_counter()
    estimate = estimate_job(ctx, spec, "local")
    estimate_s = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    result: dict = {"documents": documents, "bytes": size, "mode": mode, "estimate_s": round(estimate_s, 3),
                    "estimate_peak_mib": round(peak / 2**20, 1), "sampled": estimate.sample.documents,
                    "estimated_tokens": estimate.tokens, "estimated_computed_tokens": estimate.computed_tokens,
                    "estimated_rows": estimate.rows,
                    "duplicate_rate": round(estimate.duplicates.rate, 4), "duplicates_method": estimate.duplicates.method}
    if skip_job:
        return result
    started = time.perf_counter()
    manifest = JobHandle.bind(ctx, run_job_locally(ctx, spec).id).ledger.manifest()
    job_s = time.perf_counter() - started
    if manifest is None:
        raise RuntimeError("the job wrote no manifest")
    # usage.tokens counts what was computed: a repeated text once (docs/reuse.md)
    computed, rows = manifest.usage.tokens, manifest.counts.rows
    tokens = computed + (manifest.reuse.reused_tokens if manifest.reuse else 0)
    return {**result, "job_s": round(job_s, 2), "tokens": tokens, "computed_tokens": computed, "rows": rows,
            "tokens_error": round((estimate.tokens - tokens) / tokens, 4) if tokens else None,
            "computed_tokens_error": round((estimate.computed_tokens - computed) / computed, 4) if computed else None,
            "rows_error": round((estimate.rows - rows) / rows, 4) if rows else None,
            "estimate_over_job": round(estimate_s / job_s, 4) if job_s else None}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--mode", default="naive_chunks", choices=("error", "truncate", "chunked", "naive_chunks",
                                                                   "late_chunks"))
    parser.add_argument("--chunk-tokens", type=int, default=64)
    parser.add_argument("--most-words", type=float, default=9.0, help="longest documents: 2**N words")
    parser.add_argument("--skip-job", action="store_true", help="time the estimate alone")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 short documents")
    args = parser.parse_args(argv)
    documents, most_words = (300, 6.0) if args.quick else (args.documents, args.most_words)
    with tempfile.TemporaryDirectory(prefix="poolq-estimate-cost-") as root:
        result = measure(documents, args.mode, args.chunk_tokens, Path(root), args.skip_job, most_words)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

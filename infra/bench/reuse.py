"""Content-addressed reuse on a real-text corpus with realistic repetition: computed tokens and
wall time with reuse off and on, and a tenant's second run.

The corpus: every Debian copyright file under /usr/share/doc, cut into paragraphs (one document
each, as a pipeline that embeds paragraphs would submit them). License texts repeat across
packages, so many paragraphs are exact repeats. Each run is a job of the in-process runner with
the real engine (all-MiniLM-L6-v2); ``--quick`` takes the first 400 paragraphs, for a smoke run.
Prints one JSON line. Timings on a shared, loaded machine are not measurements.
"""
from __future__ import annotations

import argparse
import glob
import json
import tempfile
import time
from pathlib import Path

MODEL = "all-MiniLM-L6-v2"


def copyright_paragraphs(limit: int | None, min_chars: int = 40) -> list[str]:
    paragraphs: list[str] = []
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        paragraphs += [p.strip() for p in text.split("\n\n") if len(p.strip()) >= min_chars]
        if limit is not None and len(paragraphs) >= limit:
            return paragraphs[:limit]
    return paragraphs


def run_job(root: Path, corpus: str, reuse_enabled: bool, tenant: str = "bench", reuse: str = "job") -> dict:
    from poolq.jobs import JobHandle
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps.submit import submit_job
    from poolq.worker.local_runner import local_context

    ctx = local_context(root, Settings(reuse_enabled=reuse_enabled))
    spec = JobSpec.model_validate({"model": MODEL, "input": {"uri": corpus}, "reuse": reuse,
                                   "long_documents": {"mode": "truncate"}})
    started = time.perf_counter()
    job = submit_job(ctx, spec, tenant=tenant)
    wall = time.perf_counter() - started
    manifest = JobHandle.of_tenant(ctx, job.id, tenant).ledger.manifest()
    if manifest is None or manifest.reuse is None:
        raise RuntimeError(f"job {job.id} did not finish: {ctx.status.get(job.id)}")
    return {"wall_s": round(wall, 2), "documents": manifest.counts.completed, **manifest.reuse.model_dump()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 paragraphs: a smoke run")
    parser.add_argument("--limit", type=int, default=None, help="at most this many paragraphs")
    args = parser.parse_args(argv)
    paragraphs = copyright_paragraphs(400 if args.quick else args.limit)
    with tempfile.TemporaryDirectory(prefix="poolq-reuse-bench-") as scratch:
        root = Path(scratch)
        corpus = root / "paragraphs.jsonl"
        corpus.write_text("".join(json.dumps({"id": f"p{i:07d}", "text": text}) + "\n"
                                  for i, text in enumerate(paragraphs)), encoding="utf-8")
        off = run_job(root / "off", corpus.as_uri(), reuse_enabled=False)
        on = run_job(root / "on", corpus.as_uri(), reuse_enabled=True, reuse="tenant")
        again = run_job(root / "on", corpus.as_uri(), reuse_enabled=True, reuse="tenant")  # same tenant's store
    result = {"paragraphs": len(paragraphs), "distinct": len(set(paragraphs)),
              "duplicate_rate": round(1 - len(set(paragraphs)) / max(1, len(paragraphs)), 3),
              "reuse_off": off, "reuse_on": on, "tenant_second_run": again,
              "computed_token_saving": round(1 - on["computed_tokens"] / max(1, off["computed_tokens"]), 3)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

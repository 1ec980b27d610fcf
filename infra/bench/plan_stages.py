"""Planning's stages timed one by one: scan, decide and cut per document, in one process.

Generates N short JSONL documents in a local file, plans them with the in-process runner (every
section task runs here; no shard is embedded) and prints seconds and microseconds per document
for each stage, as one JSON line. What the capacity model's per-document planning costs are from.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Callable


def time_planning(documents: int, root: Path, section_bytes: int) -> dict:
    from poolq.jobs import JobHandle
    from poolq.jobs.coordination.enqueuer import FINALIZE_TASK, SHARD_TASK
    from poolq.jobs.ledger.planning_ledger import SectionStage
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import JobSpec
    from poolq.jobs.steps import planning_stages as stages
    from poolq.jobs.steps.submit import submit_job
    from poolq.worker.local_runner import local_context

    corpus = root / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as handle:
        for i in range(documents):
            text = f"a short document of the benchmark corpus, number {i}"
            handle.write(json.dumps({"id": f"doc-{i:09d}", "text": text}) + "\n")
    ctx = local_context(root / "out", Settings(plan_section_bytes=section_bytes))
    ctx.enqueuer.handlers[SHARD_TASK] = ctx.enqueuer.handlers[FINALIZE_TASK] = lambda *args: None  # planning only
    spent = {"scan": 0.0, "decide": 0.0, "cut": 0.0}

    def timed(name: str, step: Callable) -> Callable:
        def run(*args):
            started = time.perf_counter()
            try:
                return step(*args)
            finally:
                spent[name] += time.perf_counter() - started
        return run

    steps, decide = dict(stages.STAGE_STEPS), stages.decide
    stages.STAGE_STEPS[SectionStage.SCAN] = timed("scan", steps[SectionStage.SCAN])
    stages.STAGE_STEPS[SectionStage.CUT] = timed("cut", steps[SectionStage.CUT])
    stages.decide = timed("decide", decide)  # type: ignore[assignment]
    try:
        started = time.perf_counter()
        job_id = submit_job(ctx, JobSpec.model_validate({"input": {"uri": corpus.as_uri()}})).id
        total = time.perf_counter() - started
    finally:
        stages.STAGE_STEPS.update(steps)
        stages.decide = decide  # type: ignore[assignment]
    plan = JobHandle.bind(ctx, job_id).ledger.plan()
    if plan is None or plan.total != documents:
        raise RuntimeError(f"planning did not finish: {ctx.status.get(job_id)}")
    return {"documents": documents, "bytes": corpus.stat().st_size, "sections": len(plan.section_shards),
            "shards": plan.num_shards, "total_s": round(total, 2), **{f"{name}_s": round(s, 2) for name, s in spent.items()},
            "us_per_document": {name: round(s / documents * 1e6, 2) for name, s in spent.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--section-bytes", type=int, default=64 << 20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="poolq-plan-stages-") as root:
        result = time_planning(args.documents, Path(root), args.section_bytes)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

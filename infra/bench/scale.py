"""Scale benchmark: the real local stack on generated corpora of short documents, one table row per size.

The stack is Redis, SeaweedFS, the API, K Celery workers and beat; the machine's CPU is printed first.

    python infra/bench/scale.py --documents 1000000 10000000 --workers 2
    python infra/bench/scale.py --documents 20000 --set shard_max_documents=2000

Per corpus size N: N short documents (1-2 consecutive sentences of ``devtools/demo/sample_corpus.jsonl``,
ids ``doc-000000123``) are streamed into JSONL files; a fresh stack starts in its own directory
(``LocalStack`` with its API, worker and beat started through ``python infra/bench/scale.py --counted``,
see below), plus K-1 more workers (``poolq worker --concurrency 1``); the files are uploaded with boto3
(multipart, from disk) under the dev tenant's uploads prefix; one job is submitted over HTTP with
``long_documents: {"mode": "truncate"}`` and waited for; then everything started is stopped.

How each figure is measured:

- ``plan s``: job ``created_at`` (the API's status) -> the first moment the job's Redis status hash
  has ``num_shards`` (the planner sets it right after writing ``work/plan.json``), polled every
  0.1 s. ``plan.json``'s LastModified - created_at (whole seconds on SeaweedFS) is printed below the
  tables, with the queue wait (created_at -> started_at, when a worker took the plan task).
- ``e2e s``: ``created_at`` -> ``finished_at`` of the status; ``docs/s`` = completed / e2e.
- ``shard-s``: the sum of ``poolq_shard_duration_seconds`` over the job (the API's ``/metrics``,
  read before and after: wall time of each committed shard attempt: read input, tokenize, embed,
  write the Parquet part, commit); ``shard share`` = shard-s / (K x e2e), the workers' busy fraction.
- RSS: every 0.5 s a thread sums VmRSS (``/proc/<pid>/statm``) over each process tree (the API;
  each worker's parent + prefork children, the max over workers; beat; redis-server; weed) and
  keeps the peak of each sum.
- Redis: ``INFO memory`` used_memory_peak at the end; DBSIZE, the ``gpu``/``control`` queue lists
  (LLEN, with kombu's priority lists) and kombu's ``unacked`` hash polled every 0.5 s, peaks kept;
  key names grouped by pattern and the largest keys (MEMORY USAGE) at the peak (SCAN, at most
  every 5 s) and after the job.
- S3 requests: the API, every worker process (pool children too) and beat run through
  ``python infra/bench/scale.py --counted KIND DIR -- <poolq args>`` (``s3_requests.py``), which
  registers ``before-send.s3`` and ``after-call.s3`` hooks on every S3 client botocore creates in that
  process and writes its counts to ``DIR/KIND-PID.json`` every 0.5 s and at exit. Every HTTP attempt
  counts (retries too); the benchmark's own upload counts as ``bench``. Presigning makes no request.
  They are also counted by kind of object (``GetObject spec.json``), printed per shard below the tables.
- Logs: every service's log is scanned for ERROR/WARNING lines and tracebacks after the run.

Workers run on ``--device`` (auto: cuda when torch sees a GPU); ``--set NAME=VALUE`` passes any
poolq setting (``POOLQ_NAME``) to every process, e.g. ``shard_max_documents``. Each run's logs and
``result.json`` stay under ``--state-dir`` (a temporary directory, removed, when not given).

This script holds the arguments and the loop over sizes; its parts are in ``scalebench/``: ``run``
(one size), ``corpus``, ``stack``, ``job``, ``sampling``, ``s3_requests``, ``logs``, ``result`` and
``report`` (the tables); the machine's facts come from ``poolq.devtools.bench.machine``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from scalebench.report import print_report
from scalebench.result import RunResult
from scalebench.run import run_once
from scalebench.s3_requests import counted_main

from poolq.devtools.bench.machine import has_nvidia_device


def _parse_size(text: str) -> int:
    text = text.strip().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(text[-1:].lower(), 1)
    value = int(float(text[:-1] if scale != 1 else text) * scale)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: need at least 1 document")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", action="append", nargs="+", type=_parse_size, required=True,
                        help="corpus sizes (repeatable; 1000000, 1e6 and 1M are the same)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers, concurrency 1 each (default 2)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2",
                        help="a dense model the API can run with task 'embed' (splade-tiny cannot: sparse_embed only)")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where each run's stack, corpus and logs live (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="leave the stacks running and their data in place")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one job may run before it is cancelled")
    parser.add_argument("--start-timeout", type=float, default=300, help="seconds a service may take to start")
    parser.add_argument("--docs-per-file", type=_parse_size, default=1_000_000, help="documents per JSONL file")
    parser.add_argument("--threads-per-worker", type=int, default=None,
                        help="OMP/MKL threads of each worker (default: $OMP_NUM_THREADS if set, else usable "
                        "cores / workers)")
    parser.add_argument("--device", default="auto", help="the workers' device: auto (cuda when torch sees a GPU), "
                        "cpu, cuda (POOLQ_DEVICE; --set device=... wins)")
    parser.add_argument("--output-dtype", default="float32", choices=("float32", "float16", "int8", "binary"))
    parser.add_argument("--set", dest="settings_list", action="append", default=[], metavar="NAME=VALUE",
                        help="a poolq setting for every process, e.g. --set shard_max_documents=2000 (POOLQ_NAME)")
    parser.add_argument("--seaweed-volumes", type=int, default=None, help="SeaweedFS 64 MB volumes (default: sized "
                        "for the corpus and its vectors)")
    parser.add_argument("--plan-only", action="store_true",
                        help="cancel each job once it is planned: planning's time, memory and requests alone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write every result as JSON here")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    args.documents = [n for group in args.documents for n in group]
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    args.settings = {}
    for item in args.settings_list:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--set {item!r}: expected NAME=VALUE")
        args.settings[name.strip().lower()] = value
    if "device" not in args.settings:
        args.settings["device"] = _resolve_device(args.device)
    args.threads_per_worker = args.threads_per_worker or _default_threads(parser, args.workers)
    args.dims = _check_model(parser, args.model)
    return args


def _default_threads(parser: argparse.ArgumentParser, workers: int) -> int:
    """A thread count the user set (OMP_NUM_THREADS) is kept; else the usable cores are shared out."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not given:
        return max(1, len(os.sched_getaffinity(0)) // workers)
    if not given.isdigit() or int(given) < 1:
        parser.error(f"OMP_NUM_THREADS={given!r}: expected a whole number of threads, at least 1")
    return int(given)


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    if not has_nvidia_device():
        return "cpu"  # no NVIDIA device node: not worth importing torch to ask
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_model(parser: argparse.ArgumentParser, model: str) -> int:
    """The model's hidden size; refuse one that cannot serve task 'embed' (the only task the API runs)."""
    from poolq.engine import ModelRegistry
    from poolq.engine.model_spec import ModelKind

    registry = ModelRegistry.with_packaged_models()
    if model not in registry:
        parser.error(f"unknown model {model!r}; packaged: {', '.join(registry.names())}")
    spec = registry.spec(model)
    if spec.kind is not ModelKind.ENCODER:
        parser.error(f"{model} is a {spec.kind.value} model; the API only runs task 'embed' (use all-MiniLM-L6-v2)")
    return spec.hidden_size


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> list[RunResult]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--counted"]:  # inside a stack process: see s3_requests.run_counted
        counted_main(argv)
        return []
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # SIGTERM (a timeout, a killed session) unwinds like Ctrl-C: the finally blocks stop the stack
    # (Redis, SeaweedFS, the API, beat, workers) instead of leaving it running.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    args = parse_args(argv)
    temporary = args.state_dir is None
    root = Path(tempfile.mkdtemp(prefix="poolq-scale-")) if temporary else args.state_dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for documents in args.documents:
            results.append(run_once(documents, args, root, _log))
    finally:
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
        if results:
            print_report(results, args)
        if temporary and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()

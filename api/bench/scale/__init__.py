"""Scale benchmark: the real local stack on generated corpora of short documents, one table row per size.

The stack is Redis, SeaweedFS, the API, K Celery workers and beat; the machine's CPU is printed first.

    python infra/bench/scale.py --documents 1000000 10000000 --workers 2
    python -m poolq.api.bench.scale --documents 20000 --set shard_max_documents=2000

Per corpus size N: N short documents (1-2 consecutive sentences of ``api/demo/sample_corpus.jsonl``,
ids ``doc-000000123``) are streamed into JSONL files; a fresh stack starts in its own directory
(``LocalStack`` with its API, worker and beat started through ``python -m poolq.api.bench.scale --counted``,
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
  ``python -m poolq.api.bench.scale --counted KIND DIR -- <poolq args>`` (``s3_requests.py``), which
  registers ``before-send.s3`` and ``after-call.s3`` hooks on every S3 client botocore creates in that
  process and writes its counts to ``DIR/KIND-PID.json`` every 0.5 s and at exit. Every HTTP attempt
  counts (retries too); the benchmark's own upload counts as ``bench``. Presigning makes no request.
  They are also counted by kind of object (``GetObject spec.json``), printed per shard below the tables.
- Logs: every service's log is scanned for ERROR/WARNING lines and tracebacks after the run.

Workers run on ``--device`` (auto: cuda when torch sees a GPU); ``--set NAME=VALUE`` passes any
poolq setting (``POOLQ_NAME``) to every process, e.g. ``shard_max_documents``. Each run's logs and
``result.json`` stay under ``--state-dir`` (a temporary directory, removed, when not given).

Modules: ``cli`` (arguments, the loop over sizes), ``run`` (one size), ``corpus``, ``stack``, ``job``,
``sampling``, ``s3_requests``, ``logs``, ``result``, ``report`` (the tables) and ``machine``.
"""
from poolq.api.bench.scale.cli import main
from poolq.api.bench.scale.report import COLUMNS, format_table
from poolq.api.bench.scale.result import RunResult
from poolq.api.bench.scale.run import run_once

__all__ = ["COLUMNS", "RunResult", "format_table", "main", "run_once"]

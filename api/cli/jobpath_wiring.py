"""What `poolq bench jobpath` runs its measures through (devtools/bench/jobpath/jobpath_run.py): the in-process job
runner (the worker's) and the ``/v1/embeddings`` app (the API's) on a stand-in engine, and the probe a
process pinned to some cores runs. It lives at the edge because it binds both; devtools imports neither.

``python -m poolq.api.cli.jobpath_wiring '<json>'`` is the probe: its options as JSON (model, dtype,
lengths, tokens_per_run, rounds, threads); it prints its rows as one JSON line.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

GPU_TOKENS_PER_S = 50_000.0  # Settings.worker_tokens_per_s on a CUDA device: how a GPU worker sizes shards


class LocalJobs:
    """Jobs run in this process as `poolq embed` runs them (the workers' steps on a local store), on the
    stand-in engine ``engine`` serves as ``model``; each on a fresh store under ``work`` (no reuse of
    one run's outputs by the next), the one before it removed while the next is prepared.

    Shards are cut as a GPU worker cuts them: ``shard_tokens_per_s`` is the estimate that sizes them
    (Settings' default on a CUDA device; a CPU worker's 2,000 would cut 25 times more shards)."""

    def __init__(self, engine: "PoolingEngine", model: str, work: Path, shard_tokens_per_s: float = GPU_TOKENS_PER_S) -> None:
        self.engine, self.model, self.work, self.count = engine, model, work, 0
        self.shard_tokens_per_s = shard_tokens_per_s
        self.compute_thread_s = 0.0  # this thread's CPU seconds in shard tasks (jobpath_run.JobRunner)

    def prepare(self, records: list[dict], long_documents: dict) -> Callable[[], int]:
        """The input written and a context built: the job itself is left, to call once."""
        from poolq.jobs import JobSpec
        from poolq.jobs.coordination.enqueuer import SHARD_TASK, InlineEnqueuer
        from poolq.jobs.settings import Settings
        from poolq.worker import local_context

        shutil.rmtree(self.work / f"job-{self.count}", ignore_errors=True)
        self.count += 1
        root = self.work / f"job-{self.count}"
        root.mkdir(parents=True)
        source = root / "input.jsonl"
        source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
        dtype = self.engine.config.dtype
        ctx = local_context(root / "store", Settings(dtype=dtype, shard_tokens_per_s=self.shard_tokens_per_s))
        ctx.engines.use(self.model, self.engine)
        enqueuer = ctx.enqueuer
        if not isinstance(enqueuer, InlineEnqueuer):  # local_context's runs every task in this thread
            raise TypeError(f"the in-process runner sends tasks through {type(enqueuer).__name__}, not an InlineEnqueuer")
        enqueuer.handlers[SHARD_TASK] = self._timed(enqueuer.handlers[SHARD_TASK])
        spec = JobSpec.model_validate({"model": self.model, "input": {"uri": source.as_uri()}, "compute_dtype": dtype,
                                       "long_documents": long_documents})
        return lambda: self._run(ctx, spec)

    def _timed(self, run_shard: Callable) -> Callable:
        def timed(*args):
            started = time.thread_time()
            try:
                return run_shard(*args)
            finally:
                self.compute_thread_s += time.thread_time() - started
        return timed

    def _run(self, ctx, spec) -> int:
        from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_runner
        from poolq.jobs.spec.job_state import JobState
        from poolq.worker import run_job_locally

        steps = stand_in_runner(self.engine).steps
        status = run_job_locally(ctx, spec)
        if status.status is not JobState.SUCCEEDED:
            raise RuntimeError(f"the benchmark job ended {status.status.value}: {status.error}")
        if stand_in_runner(self.engine).steps == steps:  # a pool that loaded the real model would time the forward
            raise RuntimeError(f"the benchmark job ran on another engine than the stand-in for {self.model} "
                               f"({self.engine.config.dtype})")
        return status.usage.tokens


@dataclass(frozen=True)
class LaneCalls:
    """One ``POST /v1/embeddings`` of a text, and one ``GET /healthz`` (the in-process transport's floor)."""

    embed: Callable[[str], None]
    healthz: Callable[[], None]


@contextmanager
def embeddings_lane(engine: "PoolingEngine", model: str, work: Path) -> Iterator[LaneCalls]:
    """The API app on a local context whose lane a LaneServer thread answers with ``engine``, as a compute
    worker answers it (tests/api/server/routes/test_embeddings_routes.py builds it the same way), called
    through FastAPI's in-process TestClient; no rate limit gets in the way."""
    import secrets

    from fastapi.testclient import TestClient
    from pydantic import SecretStr

    from poolq.api.server.app import create_app
    from poolq.jobs.lane.memory_lane import InMemoryEmbeddingLane
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_status import LOCAL_TENANT
    from poolq.worker.lane.lane_server import LaneServer
    from poolq.worker.local_runner import local_context

    # A throwaway signing secret: the one key signed with it lives in this run's scratch store.
    settings = Settings(dtype=engine.config.dtype, rate_limit_per_s=1e9, rate_limit_burst=1_000_000_000,
                        key_signing_secret=SecretStr(secrets.token_urlsafe(48)))
    ctx = local_context(work / "lane-store", settings)
    ctx.engines.use(model, engine)
    lane = InMemoryEmbeddingLane()
    app = create_app(ctx, settings, lane=lane)
    key, _ = app.state.keys.create(LOCAL_TENANT)

    def embed(text: str) -> None:
        response = client.post("/v1/embeddings", json={"model": model, "input": text})
        if response.status_code != 200:
            raise RuntimeError(f"POST /v1/embeddings answered {response.status_code}: {response.text}")

    def healthz() -> None:
        client.get("/healthz").raise_for_status()

    authorized = {"Authorization": f"Bearer {key}"}
    with LaneServer(lane, lambda: ctx.engines, poll_s=0.05), TestClient(app, headers=authorized) as client:
        yield LaneCalls(embed, healthz)


@dataclass(frozen=True)
class JobpathOptions:
    """What `poolq bench jobpath` was asked to run (the command checked each value)."""

    model: str
    dtype: str
    lengths: tuple[int, ...]
    tokens_per_run: int
    rounds: int
    cores: tuple[int, ...]
    requests: int
    top: int
    profile_prefix: Path
    stack: bool = False  # also on the real stack (jobpath_stack.py)

    def probe(self) -> dict:
        return {"model": self.model, "dtype": self.dtype, "lengths": list(self.lengths),
                "tokens_per_run": self.tokens_per_run, "rounds": self.rounds}


def run_jobpath(options: JobpathOptions, progress: Callable[[str], None]) -> dict:
    """The whole report: the job path on each core count (pinned processes), then in this process on
    one torch thread: the profile, the host reads per step, the tokenizer alone, the embeddings lane."""
    import datetime
    import tempfile

    import torch

    from poolq.devtools.bench.jobpath.jobpath_run import Sizes, count_syncs, profile_job, tokenizer_alone
    from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_engine
    from poolq.devtools.bench.machine import machine_facts

    report: dict = {"date": datetime.date.today().isoformat(), "machine": machine_facts(), "load_before": os.getloadavg(),
                    "options": {**options.probe(), "cores": list(options.cores), "requests": options.requests},
                    "shard_tokens_per_s": GPU_TOKENS_PER_S, "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM")}
    report["scaling"] = _scaling(options, progress)
    torch.set_num_threads(1)
    engine = stand_in_engine(options.model, dtype=options.dtype)
    config = engine.config
    report["engine"] = {"hidden": engine.spec.hidden_size, "dimensions": engine.dimensions, "window": engine.spec.window_tokens,
                        "max_num_batched_tokens": config.max_num_batched_tokens, "max_num_seqs": config.max_num_seqs}
    sizes = [Sizes.for_length(engine, length, options.tokens_per_run) for length in options.lengths]
    with tempfile.TemporaryDirectory(prefix="poolq-jobpath-") as work:
        jobs = LocalJobs(engine, options.model, Path(work))
        jobs.prepare(sizes[0].records[:2], {"mode": "truncate"})()  # warm-up, outside the profile
        progress("profiles, host reads per step, the tokenizer alone")
        report["profiles"] = [profile_job(engine, jobs, size, options.top, _profile_path(options.profile_prefix, size.length))
                              for size in sizes]
        report["syncs"] = [count_syncs(engine, jobs, size) for size in sizes]
        report["tokenizer"] = [tokenizer_alone(engine, size) for size in sizes]
    if options.stack:
        from poolq.api.cli.jobpath_stack import run_on_stack
        from poolq.devtools.bench.jobpath.jobpath_run import long_documents

        report["stack"] = run_on_stack(options.model, options.dtype, GPU_TOKENS_PER_S, sizes,
                                       [long_documents(engine, size.length) for size in sizes], options.rounds, progress)
    with tempfile.TemporaryDirectory(prefix="poolq-jobpath-") as work:
        progress(f"/v1/embeddings: {options.requests} requests of one {sizes[0].length}-token input")
        report["lane"] = _lane(engine, options, sizes[0].records[0]["text"], Path(work))
    report["load_after"] = os.getloadavg()
    return report


def _profile_path(prefix: Path, length: int) -> Path:
    return prefix.with_name(f"{prefix.name}-{length}.pstats")


def _scaling(options: JobpathOptions, progress: Callable[[str], None]) -> list[dict]:
    """For each core count: one worker on that many cores, and (above one) as many one-core workers at once."""
    usable = sorted(os.sched_getaffinity(0))
    runs = []
    for cores in options.cores:
        layouts = [[usable[:cores]]] + ([[[core] for core in usable[:cores]]] if cores > 1 else [])
        for groups in layouts:
            progress(f"job path: {len(groups)} worker(s) on {cores} core(s), {options.rounds} round(s)")
            started = time.perf_counter()
            runs.append({"cores": cores, "workers": len(groups), "per_worker": probe_processes(groups, options.probe()),
                         "seconds": time.perf_counter() - started})
    return runs


def _lane(engine: "PoolingEngine", options: JobpathOptions, text: str, work: Path) -> dict:
    from poolq.devtools.bench.jobpath.jobpath_run import latency, timed_calls
    from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_runner

    alone = latency(timed_calls(lambda: engine.embed([text]), options.requests))
    with embeddings_lane(engine, options.model, work) as calls:
        healthz = latency(timed_calls(calls.healthz, options.requests))
        steps = stand_in_runner(engine).steps
        requests = latency(timed_calls(lambda: calls.embed(text), options.requests))
    if stand_in_runner(engine).steps - steps < options.requests:  # each request is one step of its own
        raise RuntimeError(f"the /v1/embeddings requests ran on another engine than the stand-in for {options.model}")
    return {"requests": requests, "engine_alone": alone, "healthz": healthz,
            "added_p50_ms": requests["p50_ms"] - alone["p50_ms"],
            "added_beyond_transport_p50_ms": requests["p50_ms"] - alone["p50_ms"] - healthz["p50_ms"]}


def run_probe(options: dict) -> list[dict]:
    """The job path's rows (devtools.bench.jobpath.measure) in this process, as ``options`` say."""
    import tempfile

    import torch

    from poolq.devtools.bench.jobpath.jobpath_run import Sizes, measure, tokenizer_alone
    from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_engine

    torch.set_num_threads(options["threads"])
    engine = stand_in_engine(options["model"], dtype=options["dtype"])
    sizes = [Sizes.for_length(engine, length, options["tokens_per_run"]) for length in options["lengths"]]
    with tempfile.TemporaryDirectory(prefix="poolq-jobpath-") as work:
        rows = measure(engine, LocalJobs(engine, options["model"], Path(work)), sizes, options["rounds"])
    # The tokenizer alone on this process' cores: its batch calls spread over the Rust tokenizer's threads
    return [{**row, "tokenizer": tokenizer_alone(engine, size)} for row, size in zip(rows, sizes)]


def probe_processes(core_groups: Sequence[Sequence[int]], options: dict) -> list[list[dict]]:
    """One probe process per group of cores, all at once, each pinned to its group; each one's rows, in the
    groups' order. One torch thread each: on a GPU host pooling runs on the device, and here a second
    intra-op thread only spins beside the job's threads (the extra cores are for the tokenizing thread)."""
    processes = [subprocess.Popen([sys.executable, "-m", __name__, json.dumps({**options, "threads": 1})],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"}, preexec_fn=_pinned(cores))
                 for cores in core_groups]
    results = []
    for cores, process in zip(core_groups, processes):
        out, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"the probe on cores {list(cores)} failed ({process.returncode}): {err.strip()[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def _pinned(cores: Sequence[int]) -> Callable[[], None]:
    return lambda: os.sched_setaffinity(0, set(cores))


if __name__ == "__main__":
    print(json.dumps(run_probe(json.loads(sys.argv[1]))))

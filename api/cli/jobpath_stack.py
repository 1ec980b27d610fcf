"""`poolq bench jobpath --stack`: the job path on the real stack, with the stand-in engine.

A `poolq dev up` stack on free ports in a temporary folder (Redis, SeaweedFS, the API); its worker
and beat are stopped, and a control worker (`poolq worker --queues control`) and one stand-in compute
worker (``stand_in_worker.py``) take their place, both with ``TOKENIZERS_PARALLELISM`` unset as in a
deployment. Each length's small and large inputs are uploaded through the API (a presigned PUT) and
submitted in alternating rounds as the stack's dev tenant. A job's seconds are the server's own, from
its submission to its end (``created_at`` to ``finished_at``: the client's polling does not count),
and rates are marginal, as in process: what the stack sustains once a job's fixed costs drop out.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from poolq.api.cli.stand_in_worker import STAND_IN_SERVES

if TYPE_CHECKING:
    from poolq.api.client.poolq_client import PoolqClient
    from poolq.devtools.bench.jobpath.jobpath_run import Sizes

_READY = b" ready."  # what a worker logs once it consumes its queues
_JOB_TIMEOUT_S = 900.0


def run_on_stack(model: str, dtype: str, shard_tokens_per_s: float, sizes: Sequence["Sizes"], policies: Sequence[dict],
                 rounds: int, progress: Callable[[str], None]) -> list[dict]:
    """One row per length (``policies``: each length's long-document policy), as ``measure`` gives in process."""
    from poolq.api.client.poolq_client import PoolqClient
    from poolq.devtools.devstack.stack import LocalStack, StackPorts

    with tempfile.TemporaryDirectory(prefix="poolq-jobpath-stack-") as work:
        stack = LocalStack(Path(work) / "stack", ports=StackPorts(0, 0, 0))
        progress("the real stack: poolq dev up (Redis, SeaweedFS, the API) on free ports")
        bench_env = {"POOLQ_SHARD_TOKENS_PER_S": str(shard_tokens_per_s), "POOLQ_DTYPE": dtype}
        before = {name: os.environ.get(name) for name in bench_env}
        os.environ.update(bench_env)  # the API (the estimate, the spec's checks) sizes as the workers do
        try:
            state, _ = stack.up(log=lambda line: None)
            stack.down(only=["worker", "beat"])  # replaced below: its compute worker would run the real model
            env = {**os.environ, **state.worker_env(), **bench_env}
            env.pop("TOKENIZERS_PARALLELISM", None)
            logs = Path(work) / "logs"
            workers = [_start(["-m", "poolq.api", "worker", "--queues", "control", "--hostname", "bench-control"], env,
                              logs / "control.log"),
                       _start(["-m", "poolq.api.cli.stand_in_worker",
                               json.dumps({"model": model, "dtype": dtype, "hostname": "bench-compute"})], env,
                              logs / "compute.log")]
            try:
                client = PoolqClient(state.api_url, state.api_key, timeout=120.0)
                rows = [_measure(client, model, dtype, size, policy, rounds, progress) for size, policy in zip(sizes, policies)]
                if STAND_IN_SERVES not in (logs / "compute.log").read_text(errors="replace"):
                    raise RuntimeError("the stack's compute worker did not serve the stand-in engine "
                                       f"(see {logs / 'compute.log'}): the rates would be the model's")
                return rows
            finally:
                _stop(workers)
        finally:
            stack.down()
            for name, value in before.items():  # this process' environment as it was
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _start(args: list[str], env: dict[str, str], log_path: Path) -> int:
    from poolq.devtools.devstack.process import spawn, wait_until

    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid = spawn([sys.executable, *args], log_path=log_path, pid_path=None, env=env)
    wait_until(lambda: log_path.exists() and _READY in log_path.read_bytes(), timeout=180, interval=0.2,
               what=f"the bench's worker ({args[1]})", log_path=log_path, pid=pid)
    return pid


def _stop(pids: list[int]) -> None:
    from poolq.devtools.devstack.process import stop_pid

    for pid in pids:
        stop_pid(pid, expect_in_cmdline="worker")


def _measure(client: "PoolqClient", model: str, dtype: str, size: "Sizes", policy: dict, rounds: int,
             progress: Callable[[str], None]) -> dict:
    from poolq.devtools.bench.jobpath.jobpath_run import marginal

    inputs = {"small": size.records[: size.small], "large": size.records}
    uris = {name: client.upload("".join(json.dumps(record) + "\n" for record in records).encode("utf-8"), format="jsonl")
            for name, records in inputs.items()}
    spec = {"model": model, "compute_dtype": dtype, "long_documents": policy}
    _job(client, {**spec, "input": {"documents": inputs["small"][:2]}})  # warm-up: the first job loads and plans cold
    seconds: dict[str, list[float]] = {"small": [], "large": []}
    tokens: dict[str, int] = {}
    for round_index in range(rounds):
        for name in ("small", "large") if round_index % 2 == 0 else ("large", "small"):
            progress(f"the real stack: {size.length}-token documents, round {round_index + 1}, {name} input")
            seconds[name].append(_job(client, {**spec, "input": {"uri": uris[name]}}, tokens, name))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    per_s = marginal(seconds)  # the in-process measure's rate, from the server's seconds
    extra_documents, extra_tokens = len(inputs["large"]) - len(inputs["small"]), tokens["large"] - tokens["small"]
    return {"length": size.length, "documents": [len(inputs["small"]), len(inputs["large"])],
            "tokens": [tokens["small"], tokens["large"]], "rounds_s": seconds, "median_s": median,
            "documents_per_s": per_s and per_s * extra_documents, "tokens_per_s": per_s and per_s * extra_tokens,
            "whole_job_documents_per_s": len(inputs["large"]) / median["large"]}


def _job(client: "PoolqClient", spec: dict, tokens: dict[str, int] | None = None, name: str = "") -> float:
    """Submit ``spec``, wait for its end; the server's seconds from submission to end."""
    from poolq.jobs.spec.job_state import JobState

    submitted = client.submit(spec)
    final = client.wait(submitted.id, poll_interval=0.1, timeout=_JOB_TIMEOUT_S)
    if final.status is not JobState.SUCCEEDED or final.finished_at is None:
        raise RuntimeError(f"the benchmark job {final.id} ended {final.status.value}: {final.error}")
    if tokens is not None:
        tokens[name] = final.usage.tokens
    return (final.finished_at - final.created_at).total_seconds()

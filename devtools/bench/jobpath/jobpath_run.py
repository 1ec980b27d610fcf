"""`poolq bench jobpath`'s measures: the whole job path with a stand-in engine (stand_in_engine.py),
so that what is timed is the path around the model's forward, not the forward.

A job is whatever a ``JobRunner`` the caller passes prepares (the CLI passes the in-process runner, which runs the
workers' own steps on a local store: submit, planning, one shard through the engine's steps, Parquet
parts, commits, the manifest). Rates are **marginal**: each length runs a small and a large input, and
docs/s = (large - small documents) / (large - small seconds), so a job's fixed costs (submit, plan,
finalize) drop out and what is left is what the path sustains. Rounds alternate which size goes first;
medians are reported. The same from the process' CPU time (all its threads) gives documents per
CPU-second: on a machine shared with other work, wall seconds stretch with the load and CPU seconds
far less, so that is the steadier per-core figure there. The same again from the CPU time of the
thread that runs the shards (the runner's ``compute_thread_s``) gives what a compute worker's own
thread spends per document: the part of the path no second core shares.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from poolq.devtools.bench.jobpath.host_reads import HostReads
from poolq.devtools.bench.jobpath.jobpath_documents import documents
from poolq.devtools.bench.jobpath.stand_in_engine import stand_in_runner
from poolq.engine import PoolingEngine

SMALL_SHARE = 4  # the small input holds a quarter of the large one's documents
# Where a job's time goes, by stage: (label, file, function, less): each one's cumulative time in the profile,
# less that of the (file, function) pairs in ``less``. Indented labels are inside the one above.
_ENGINE = ("engine_loop.py", "results")  # the engine's loop: its steps, its results handed out in order
_WRITE = ("shard_attempt.py", "write_attempt")
STAGES: tuple[tuple[str, str, str, tuple[tuple[str, str], ...]], ...] = (
    ("plan the job (read, scan, decide, cut)", "planner.py", "plan_job", ()),
    ("run the shard", "shard_runner.py", "run_shard", ()),
    ("  read its records back", "shard_runner.py", "_read_shard", ()),
    ("  the engine's loop", *_ENGINE, ()),
    ("    wait for the tokenizing thread", "engine_loop.py", "_take_planned", ()),
    ("    make the batch (scheduler)", "scheduler.py", "schedule", ()),
    ("    stand-in forward", "stand_in_engine.py", "forward", ()),
    ("    pooling and heads, outputs to the host", "dispatcher.py", "forward", ()),
    ("  results to rows (reuse, checks, stats, columns)", "shard_runner.py", "_embed_on", (_ENGINE, _WRITE)),
    ("  write the part and commit", *_WRITE, ()),
    ("finalize (errors, manifest)", "finalizer.py", "finalize_job", ()),
)


class JobRunner(Protocol):
    # CPU seconds the calling thread spent running shards so far: a compute worker's own thread (its
    # shards' records read back, the engine's steps and pooling, rows, the part and its commit)
    compute_thread_s: float

    def prepare(self, records: list[dict], long_documents: dict) -> Callable[[], int]:
        """Everything before a job of ``records`` (its input written, a context built); returns the job
        itself (submit to succeeded), to call once: it returns the job's tokens (its usage)."""
        ...


@dataclass(frozen=True)
class Sizes:
    """The documents of one length a measure runs: the large input, and how many of them the small one takes."""

    length: int
    records: list[dict]
    small: int

    @classmethod
    def for_length(cls, engine: PoolingEngine, length: int, tokens_per_run: int) -> "Sizes":
        large = max(SMALL_SHARE, tokens_per_run // length)
        return cls(length, documents(engine.tokenizer, length, large, prefix=f"t{length}"), max(1, large // SMALL_SHARE))


def long_documents(engine: PoolingEngine, length: int) -> dict:
    """The job's policy: ``truncate`` (no document is longer than it says), in a window that holds
    ``length`` tokens where the model's default one is shorter (MiniLM's 256 for 512-token documents)."""
    policy: dict = {"mode": "truncate"}
    if length > engine.spec.window_tokens:
        policy["window_tokens"] = length
    return policy


def measure(engine: PoolingEngine, run_jobs: JobRunner, sizes: Sequence[Sizes], rounds: int) -> list[dict]:
    """One row per length: the rounds' seconds, the medians, the marginal documents/s and tokens/s."""
    rows = []
    for size in sizes:
        policy = long_documents(engine, size.length)
        inputs = {"small": size.records[: size.small], "large": size.records}
        run_jobs.prepare(inputs["small"][:2], policy)()  # warm-up: the first job pays for imports and first calls
        seconds: dict[str, list[float]] = {"small": [], "large": []}
        cpu_seconds: dict[str, list[float]] = {"small": [], "large": []}
        compute_seconds: dict[str, list[float]] = {"small": [], "large": []}
        tokens: dict[str, int] = {}
        for round_index in range(rounds):
            for name in ("small", "large") if round_index % 2 == 0 else ("large", "small"):
                job = run_jobs.prepare(inputs[name], policy)
                started, cpu_started, compute_started = time.perf_counter(), time.process_time(), run_jobs.compute_thread_s
                tokens[name] = job()
                seconds[name].append(time.perf_counter() - started)
                cpu_seconds[name].append(time.process_time() - cpu_started)
                compute_seconds[name].append(run_jobs.compute_thread_s - compute_started)
        median = {name: statistics.median(values) for name, values in seconds.items()}
        per_s, per_cpu_s = marginal(seconds), marginal(cpu_seconds)
        extra_documents, extra_tokens = len(inputs["large"]) - len(inputs["small"]), tokens["large"] - tokens["small"]
        compute_ms = 1000 * (statistics.median(compute_seconds["large"]) - statistics.median(compute_seconds["small"]))
        rows.append({"length": size.length, "documents": [len(inputs["small"]), len(inputs["large"])],
                     "tokens": [tokens["small"], tokens["large"]], "policy": policy, "rounds_s": seconds,
                     "rounds_cpu_s": cpu_seconds, "median_s": median,
                     "documents_per_s": per_s and per_s * extra_documents, "tokens_per_s": per_s and per_s * extra_tokens,
                     "documents_per_cpu_s": per_cpu_s and per_cpu_s * extra_documents,
                     "compute_thread_ms_per_document": compute_ms / extra_documents if compute_ms > 0 else None,
                     "whole_job_documents_per_s": len(inputs["large"]) / median["large"]})
    return rows


def marginal(seconds: dict[str, list[float]]) -> float | None:
    """1 / (the large input's median seconds - the small one's); None where the large one was not measurably
    slower (too few documents for the noise)."""
    extra = statistics.median(seconds["large"]) - statistics.median(seconds["small"])
    return None if extra <= 0 else 1 / extra


def profile_job(engine: PoolingEngine, run_jobs: JobRunner, size: Sizes, top: int, out: Path) -> dict:
    """The large input once under cProfile (the caller's thread: the engine's steps and the job's
    steps; the tokenizing thread beside it shows as waits where the steps outrun it). The stats go to
    ``out`` (``python -m pstats OUT``); the top ``top`` functions by own time come back as text."""
    profiler = cProfile.Profile()
    profiler.runcall(run_jobs.prepare(size.records, long_documents(engine, size.length)))
    profiler.dump_stats(str(out))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return {"length": size.length, "documents": len(size.records), "file": str(out),
            "total_s": stats.total_tt, "stages": _stages(stats), "top": _table(text.getvalue())}  # type: ignore[attr-defined]


def _stages(stats: pstats.Stats) -> list[dict]:
    """Each of STAGES' cumulative seconds (0 where the job never called it)."""
    cumulative: dict[tuple[str, str], float] = {}
    for (file, _, function), (_, _, _, seconds, _) in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[(file, function)] = cumulative.get((file, function), 0.0) + seconds
    return [{"stage": label, "seconds": cumulative.get((file, function), 0.0) - sum(cumulative.get(part, 0.0) for part in less)}
            for label, file, function, less in STAGES]


def _table(printed: str) -> str:
    """pstats' listing from its header line on, without blank lines."""
    body = printed[printed.find("ncalls"):] if "ncalls" in printed else printed
    return "\n".join(line.rstrip() for line in body.splitlines() if line.strip())


def count_syncs(engine: PoolingEngine, run_jobs: JobRunner, size: Sizes) -> dict:
    """One job of ``size`` under :class:`HostReads`: host reads per engine step, by line."""
    runner = stand_in_runner(engine)
    job = run_jobs.prepare(size.records, long_documents(engine, size.length))
    steps_before = runner.steps
    with HostReads() as reads:
        job()
    steps = max(1, runner.steps - steps_before)
    sites = sorted(reads.sites.items(), key=lambda item: (not item[0].device_read, -item[1]))
    return {"length": size.length, "documents": len(size.records), "steps": steps,
            "device_reads_per_step": reads.device_reads() / steps, "host_reads_per_step": reads.host_reads() / steps,
            "sites": [{"site": str(site), "device_read": site.device_read, "per_step": count / steps}
                      for site, count in sites]}


def tokenizer_alone(engine: PoolingEngine, size: Sizes, group: int = 64) -> dict:
    """The tokenizer by itself on the same texts, in the groups the engine's planning thread uses: the
    most documents/s that thread can hand the steps."""
    texts = [record["text"] for record in size.records]
    started, cpu_started = time.perf_counter(), time.process_time()
    for first in range(0, len(texts), group):
        engine.tokenizer.count_and_tokenize(texts[first: first + group])
    return {"length": size.length, "documents_per_s": len(texts) / (time.perf_counter() - started),
            "documents_per_cpu_s": len(texts) / max(1e-9, time.process_time() - cpu_started)}


def timed_calls(call: Callable[[], object], count: int) -> list[float]:
    """Seconds of each of ``count`` calls of ``call``, one after another (after one warm-up call)."""
    call()
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


def latency(seconds: Sequence[float]) -> dict:
    """p50 and p95 in milliseconds, and calls per second one after another."""
    ordered = sorted(seconds)
    return {"count": len(ordered), "p50_ms": 1000 * statistics.median(ordered),
            "p95_ms": 1000 * ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "per_s": len(ordered) / sum(ordered)}

"""What each compute worker process did with its models, as its heartbeat reports it
(``WorkerRegistry.report_models``), and the totals per model over the live workers that ``/metrics``
and ``GET /v1/models`` show.

Counts are per worker process lifetime: a worker that restarts (or stops) takes its share out of the
totals, so a total may go down; Prometheus reads a counter that drops as a reset.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

UNKNOWN_DTYPE = "unknown"  # an engine handed to the pool (EnginePool.use): loaded there, never loaded by it


@dataclass(frozen=True)
class WorkerModelStats:
    """One (model, compute dtype) engine of one worker process (``EnginePool.stats``, said with each beat)."""

    model: str
    dtype: str
    loads: int  # times this process loaded it (again after an eviction)
    evictions: int  # times it was unloaded to make room for another
    load_seconds: float  # over all its loads
    resident_bytes: int  # its weights' and buffers' bytes, as measured at its last load
    loaded: bool  # in the worker's memory now
    in_use: int = 0  # runs holding it now
    device: str = "cpu"  # the worker's device kind (cpu, cuda): its kernels, so its vectors' last bits


@dataclass(frozen=True)
class ModelTotals:
    """One model summed over the live workers' latest reports (every compute dtype)."""

    model: str
    loaded_workers: int = 0  # live workers holding it now
    loads: int = 0
    evictions: int = 0
    load_seconds: float = 0.0
    resident_bytes: int = 0  # memory it holds now: only the workers (and dtypes) that have it loaded

    def __add__(self, other: "ModelTotals") -> "ModelTotals":
        """Two sets of totals as one, named as this one (a model and its pinned revisions, ``name@rev``)."""
        return ModelTotals(self.model, self.loaded_workers + other.loaded_workers, self.loads + other.loads,
                           self.evictions + other.evictions, self.load_seconds + other.load_seconds,
                           self.resident_bytes + other.resident_bytes)


def model_totals(reports: Iterable[tuple[WorkerModelStats, ...]]) -> dict[str, ModelTotals]:
    """Model -> its totals over ``reports`` (one per live worker); a worker counts once per model it
    holds, however many dtypes of it it holds."""
    totals: dict[str, ModelTotals] = {}
    for report in reports:
        holding = {stats.model for stats in report if stats.loaded}
        for stats in report:
            resident = stats.resident_bytes if stats.loaded else 0
            totals[stats.model] = totals.get(stats.model, ModelTotals(stats.model)) + ModelTotals(
                stats.model, 0, stats.loads, stats.evictions, stats.load_seconds, resident)
        for model in holding:
            totals[model] = totals[model] + ModelTotals(model, loaded_workers=1)
    return dict(sorted(totals.items()))

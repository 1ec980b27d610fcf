"""Worker-seconds and wall time of a job's tokens on the compute workers alive now, from the
throughput they measured (``jobs/coordination/worker_throughput.py``). No measurement, no time:
an estimate never makes one up."""
from __future__ import annotations

from poolq.jobs.context import JobContext
from poolq.products.estimate.job_estimate import WorkerRate, WorkerTime


def worker_time(ctx: JobContext, model: str, tokens: int) -> WorkerTime:
    alive = ctx.workers.live_names()
    rates = [rate for rate in ctx.throughput.rates(model) if rate.worker in alive and rate.tokens_per_s > 0]
    measured = [WorkerRate(worker=rate.worker, dtype=rate.dtype, tokens_per_s=round(rate.tokens_per_s, 1))
                for rate in sorted(rates, key=lambda rate: rate.worker)]
    if not alive:
        return WorkerTime(workers_alive=0, note="no compute worker is alive: no time can be estimated")
    if not rates:
        return WorkerTime(workers_alive=len(alive), note=f"no live worker has reported its throughput for {model!r} "
                          "yet (a worker measures it on its first shards of the model): no time estimated")
    mean = sum(rate.tokens_per_s for rate in rates) / len(rates)
    # Workers that never ran this model would run it at about the measured mean.
    summed = mean * len(alive)
    note = "" if len(rates) == len(alive) else (f"{len(alive) - len(rates)} of {len(alive)} live workers have not "
                                                 f"measured {model!r}; counted at the others' mean")
    return WorkerTime(workers_alive=len(alive), measured=measured, worker_seconds=round(tokens / mean, 1),
                      wall_seconds=round(tokens / summed, 1), note=note)

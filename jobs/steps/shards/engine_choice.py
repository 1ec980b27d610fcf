"""Which engine embeds a shard: the job's one engine identity, unless its spec allows mixing.

The dtype is the spec's pin, else the one claimed by the job's first shard, else this worker's own
(Settings.serving.dtype, ``auto`` by default). A worker computes any dtype it is asked for (bf16 without
native bf16 is emulated: the same vectors, slower), so a dtype never sends a shard away. Other model
files, pooling or device kind do: ``EngineMismatch`` is retryable (jobs/steps/failures.py), so the
shard goes back to the queue for another worker, ``MAX_RETRIES`` times at most, then fails with a
message naming both identities. An engine this worker cannot build in that dtype at all (int8 on a
GPU) counts as a mismatch too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from poolq.engine import EngineConfigError
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.engine_claim import claim_engine
from poolq.jobs.spec.engine_identity import EngineIdentity, EngineMismatch

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


def choose_engine(job: JobHandle) -> tuple["PoolingEngine", EngineIdentity]:
    """The engine for ``job``'s next shard and its identity; raises EngineMismatch where this worker
    cannot make the job's rows (the shard is then left to another)."""
    engines, model = job.ctx.engines, job.spec.model
    identity = engines.engine_identity(model, job.compute_dtype)
    engine = _engine(job, identity.dtype)  # before claiming: never claim what this worker cannot build
    if job.spec.allow_mixed_engines:
        return engine, identity
    claimed = claim_engine(job.ledger, identity)
    if claimed != identity and job.spec.compute_dtype == "auto" and claimed.dtype != identity.dtype:
        # another worker's first shard claimed the job a moment before ours: compute in its dtype
        identity = engines.engine_identity(model, claimed.dtype)
        engine = _engine(job, identity.dtype)
    if claimed != identity:
        raise EngineMismatch(f"job {job.id}'s rows come from engine {claimed.model_dump()}; this worker's differs "
                             f"({'; '.join(claimed.differences(identity))}), so it leaves the shard to one that has "
                             "it (submit with allow_mixed_engines to let any worker embed it)")
    return engine, identity


def _engine(job: JobHandle, dtype: str) -> "PoolingEngine":
    try:
        return job.ctx.engines.get(job.spec.model, dtype)
    except EngineConfigError as exc:
        raise EngineMismatch(f"this worker cannot compute {job.spec.model} in {dtype}: {exc}") from exc

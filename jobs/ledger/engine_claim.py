"""The job's engine identity in its ledger: the first shard to run claims it (a conditional write),
every later shard reads it and embeds with that engine, or leaves the shard to a worker that has it."""
from __future__ import annotations

import json

from poolq.jobs.ledger.job_ledger import JobLedger, ShardCommit
from poolq.jobs.spec.engine_identity import EngineIdentity
from poolq.storage import ObjectNotFoundError


def claimed_engine(ledger: JobLedger) -> EngineIdentity | None:
    """The identity the job's rows come from; None before its first shard ran (or in a mixing job)."""
    try:
        return EngineIdentity.model_validate(json.loads(ledger.store.get(ledger.layout.engine_claim)))
    except ObjectNotFoundError:
        return None


def claim_engine(ledger: JobLedger, identity: EngineIdentity) -> EngineIdentity:
    """Claim ``identity`` for the job unless one is claimed; returns the claimed one (ours or the first)."""
    if ledger.store.put_once(ledger.layout.engine_claim, identity.model_dump_json(indent=2).encode()):
        return identity
    claimed = claimed_engine(ledger)
    if claimed is None:  # pragma: no cover - put_once refused, so the object exists
        raise RuntimeError(f"{ledger.layout.engine_claim}: the write was refused but nothing is there")
    return claimed


def job_engine(ledger: JobLedger, commits: dict[int, ShardCommit], mixed: bool) -> EngineIdentity | None:
    """The manifest's ``engine``: the claimed identity; in a job that allows mixing (``mixed``), the
    one identity its commits with rows name, None if they name several (``engines`` lists them)."""
    claimed = None if mixed else claimed_engine(ledger)
    if claimed is not None:
        return claimed
    made = {EngineIdentity.model_validate(c.engine_identity) for c in commits.values() if c.rows and c.engine_identity}
    return made.pop() if len(made) == 1 else None

"""Units of work: what leases, dispatch times and counters name, and the queue each unit goes to.

Units are named ``plan``, ``plan-scan-00003`` and ``plan-cut-00003`` (a section's planning stages),
``shard-00007`` and ``finalize``.
"""
from __future__ import annotations

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE
from poolq.jobs.ledger.planning_ledger import SectionStage

PLAN_UNIT = "plan"
FINALIZE_UNIT = "finalize"
_SHARD_PREFIX = "shard-"


def shard_unit(shard: int) -> str:
    return f"{_SHARD_PREFIX}{shard:05d}"


def section_unit(stage: SectionStage, section: int) -> str:
    return f"plan-{stage.value}-{section:05d}"


def queue_of(unit: str) -> str:
    """The queue a unit's task is sent to: shards to the GPU workers, planning and finalize to control."""
    return GPU_QUEUE if unit.startswith(_SHARD_PREFIX) else CONTROL_QUEUE

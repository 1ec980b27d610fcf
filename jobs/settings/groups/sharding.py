"""How an input is planned into shards, how big a shard is, and how many go out at once."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class ShardingSettings(SettingsGroup):
    """Planning sections, shard sizes, and fair share of the compute workers."""

    # Fair share (jobs/coordination/fair_share.py): as many shard tasks are out at once as compute
    # workers are alive, so a new job's shards are next in line, not behind a backlog of another's.
    dispatch_window: int = Field(8, ge=1, description="shard tasks out at once, over every job, while no compute "
                                 "worker has said it is alive (in-process runs; a queue waiting for its first worker)")
    shards_per_worker: int = Field(1, ge=1, description="shard tasks out at once per live compute worker (more "
                                   "queue work behind a running shard)")
    control_concurrency: int = Field(2, ge=1, description="pool processes of the control worker (planning, "
                                     "finalizing, the reconciler) that `poolq worker` starts beside the compute one")
    worker_heartbeat_s: float = Field(5.0, gt=0, description="how often a compute worker says it is alive; it "
                                      "counts as gone after three missed beats")
    # A shard is about shard_work_s of one worker's time: its tokens, estimated from characters
    # (CHARS_PER_TOKEN) before anything is tokenized, stay under shard_work_s * shard_tokens_per_s.
    # Unset, the throughput is what a worker of ``device`` does with a MiniLM-sized model: ~50k
    # tokens/s on a GPU (an estimate until infra/gpu/check.sh has run), ~2k on a 2-core CPU
    # (devtools/bench/scale/ measured 2,100). The document and character caps bound a shard's memory.
    # ~10 s: a worker turns to another job's shard at least that often (fair share, a small job's
    # wait); shorter shards cost more descriptors and commits (docs/scheduling.md measures it).
    shard_work_s: float = Field(10.0, gt=0, description="seconds of one worker's work per shard")
    shard_tokens_per_s: float | None = Field(None, gt=0, description="a worker's embedding throughput, for sizing "
                                             "shards (default: by device)")
    shard_max_documents: int = Field(20_000, ge=1)
    shard_max_chars: int = Field(16_000_000, ge=1)
    plan_section_bytes: int = Field(64 << 20, ge=1 << 10, description="planning reads the input in sections of about "
                                    "this many bytes, each by its own task (large objects are cut at line ends)")
    plan_partition_bytes: int = Field(16 << 20, ge=1 << 16, description="planning decides duplicate ids and unchanged "
                                      "documents in partitions of about this much input each (its memory bound)")

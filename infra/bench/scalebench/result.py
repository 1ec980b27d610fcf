"""RunResult: everything one run measured, as the tables, the details and ``result.json`` read it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunResult:
    documents: int
    workers: int
    status: str = "not started"
    shards: int | None = None
    plan_s: float | None = None
    plan_ledger_s: float | None = None  # plan.json LastModified - created_at (1 s resolution)
    queued_s: float | None = None  # created_at -> started_at (the plan task picked up)
    e2e_s: float | None = None
    docs_per_s: float | None = None
    completed: int = 0
    failed: int = 0
    tokens: int = 0
    shard_seconds: float | None = None
    shard_share: float | None = None
    shards_committed_metric: int | None = None
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    redis_used_memory_peak_mb: float | None = None
    redis_sampled_peak_mb: float | None = None
    peak_keys: int = 0
    peak_queue: dict[str, int] = field(default_factory=dict)
    peak_unacked: int = 0
    keys_at_peak: dict[str, int] = field(default_factory=dict)
    keys_after: dict[str, int] = field(default_factory=dict)
    largest_keys_at_peak: list[dict] = field(default_factory=list)
    largest_keys_after: list[dict] = field(default_factory=list)
    s3: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    log_findings: dict[str, dict] = field(default_factory=dict)
    corpus_mb: float = 0.0
    generate_s: float = 0.0
    stack_start_s: float = 0.0
    upload_s: float = 0.0
    job_id: str | None = None
    error: str | None = None
    state_dir: str = ""
    pids: dict[str, list[int]] = field(default_factory=dict)  # what was started, by process kind

    def s3_total(self, operations: tuple[str, ...] | None = None, kinds: tuple[str, ...] | None = None) -> int:
        total = 0
        for kind, counts in self.s3.items():
            if kinds is not None and kind not in kinds:
                continue
            total += sum(n for op, n in counts.get("requests", {}).items() if operations is None or op in operations)
        return total

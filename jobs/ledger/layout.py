"""Where a job's objects live in the store: one place builds every key.

The store is the ledger: what is written here (spec, plan, commit markers, cancel request,
manifest) decides a job's fate; Redis only caches it and holds the queue and leases.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from poolq.storage import join_key


class ShardObjectKind(Enum):
    COMMIT = "commit"  # work/shard-00001.commit.json
    ATTEMPT_ERRORS = "attempt_errors"  # work/shard-00001.<attempt>.errors.jsonl
    ATTEMPT_PART = "attempt_part"  # parts/part-00001.<attempt>.parquet
    ATTEMPT_STATS = "attempt_stats"  # work/shard-00001.<attempt>.stats.json (the data report's counts)


# The names JobLayout builds below, read back: the one place that parses a shard's object keys.
_SHARD_OBJECT_NAMES = {
    ShardObjectKind.COMMIT: re.compile(r"shard-(\d{5,})\.commit\.json"),
    ShardObjectKind.ATTEMPT_ERRORS: re.compile(r"shard-(\d{5,})\.([^.]+)\.errors\.jsonl"),
    ShardObjectKind.ATTEMPT_PART: re.compile(r"part-(\d{5,})\.([^.]+)\.parquet"),
    ShardObjectKind.ATTEMPT_STATS: re.compile(r"shard-(\d{5,})\.([^.]+)\.stats\.json"),
}


@dataclass(frozen=True)
class ShardObject:
    """What a key under a job's ``work/`` or ``parts/`` prefix is: which shard's, which attempt's."""

    kind: ShardObjectKind
    shard: int
    attempt: str | None = None  # None for a shard's input and its commit marker


def parse_shard_object(key: str) -> ShardObject | None:
    """The shard object ``key`` names, or None (plan.json, carried parts, anything else)."""
    name = key.rsplit("/", 1)[-1]
    for kind, pattern in _SHARD_OBJECT_NAMES.items():
        match = pattern.fullmatch(name)
        if match:
            return ShardObject(kind, int(match.group(1)), match.group(2) if pattern.groups > 1 else None)
    return None


@dataclass(frozen=True)
class ServiceLayout:
    """Keys shared by every job under ``prefix``: the job and active-job indexes, idempotency keys,
    schedules. A tenant's objects all live under ``<prefix>/tenants/<tenant>/``."""

    prefix: str

    def _key(self, *parts: str) -> str:
        return join_key(self.prefix, *parts)

    @property
    def active_prefix(self) -> str:
        return self._key("_active") + "/"

    def active(self, job_id: str) -> str:
        """An empty marker per unfinished job: the reconciler's work list, rebuilt from nothing else."""
        return self._key("_active", job_id)

    def idempotency(self, key_digest: str) -> str:
        return self._key("_idempotency", f"{key_digest}.json")

    @property
    def schedules_prefix(self) -> str:
        return self._key("_schedules") + "/"

    def schedule(self, schedule_id: str) -> str:
        return self._key("_schedules", f"{schedule_id}.json")

    def schedule_runs_prefix(self, schedule_id: str) -> str:
        """A schedule's run records, kept apart from ``schedules_prefix`` so listing schedules stays cheap."""
        return self._key("_schedule_runs", schedule_id) + "/"

    def schedule_run(self, schedule_id: str, slot_name: str) -> str:
        """One record per (schedule, slot): which job ran that slot. Names sort in slot order."""
        return self._key("_schedule_runs", schedule_id, f"{slot_name}.json")

    def job_index(self, job_id: str) -> str:
        """Which tenant a job belongs to; written first at submit, never changed."""
        return self._key("_jobs", f"{job_id}.json")

    def tenant_jobs(self, tenant: str) -> str:
        return self._key("tenants", tenant, "jobs")

    def uploads_prefix(self, tenant: str) -> str:
        return self._key("tenants", tenant, "uploads") + "/"

    def tenant_key(self, tenant: str, *parts: str) -> str:
        """A key in ``tenant``'s own area (its files and batches: ``products/batches/batch_layout.py``)."""
        return self._key("tenants", tenant, *parts)

    def job(self, tenant: str, job_id: str) -> "JobLayout":
        return JobLayout(self.tenant_jobs(tenant), job_id)


@dataclass(frozen=True)
class JobLayout:
    """``<prefix>/<job_id>/...`` (prefix: ``<service>/tenants/<tenant>/jobs``): spec, inline input, plan,
    shards, attempts, commits, the manifest."""

    prefix: str
    job_id: str

    @property
    def root(self) -> str:
        return join_key(self.prefix, self.job_id)

    def _key(self, *parts: str) -> str:
        return join_key(self.root, *parts)

    @property
    def spec(self) -> str:
        return self._key("spec.json")

    @property
    def inline_input(self) -> str:
        return self._key("input.jsonl")

    @property
    def plan(self) -> str:
        """Written once, after every shard input: how many shards there are and what planning found."""
        return self._key("work", "plan.json")

    @property
    def plan_errors(self) -> str:
        return self._key("work", "plan-errors.jsonl")

    @property
    def cancel(self) -> str:
        return self._key("cancel.json")

    @property
    def planning_prefix(self) -> str:
        """Planning's objects (``jobs/planning/``): the input's sections and what each stage found."""
        return self._key("planning") + "/"

    @property
    def planning_sections(self) -> str:
        return self._key("planning", "sections.json")

    @property
    def planning_decided(self) -> str:
        """Written once every section is scanned: duplicates and carried documents decided."""
        return self._key("planning", "decided.json")

    def section_object(self, section: int, name: str) -> str:
        """``planning/section-00007.<name>``: ids.tsv, skips.npz, errors.jsonl."""
        return self._key("planning", f"section-{section:05d}.{name}")

    @property
    def planning_stages_prefix(self) -> str:
        """The sections' stage records alone (listed to see which sections are done)."""
        return self._key("planning", "stages") + "/"

    def stage_record(self, section: int, stage: str) -> str:
        """``planning/stages/section-00007.scan.json`` (or ``.cut.json``): the stage is done."""
        return self._key("planning", "stages", f"section-{section:05d}.{stage}.json")

    def shard_input(self, section: int, local: int) -> str:
        """The descriptor of the ``local``-th shard cut from ``section``: byte ranges of the input."""
        return self.section_object(section, f"shard-{local:05d}.json")

    def shard_commit(self, shard: int) -> str:
        """The commit marker: names the one attempt whose outputs count."""
        return self._key("work", f"shard-{shard:05d}.commit.json")

    @property
    def engine_claim(self) -> str:
        """The engine identity the job's rows come from: claimed by its first shard (written once)."""
        return self._key("work", "engine.json")

    def shard_key_prefixes(self, shard: int) -> tuple[str, str]:
        """The prefixes under which all of ``shard``'s attempt objects (and nothing else) live."""
        return self._key("parts", f"part-{shard:05d}."), self._key("work", f"shard-{shard:05d}.")

    def attempt_errors(self, shard: int, attempt: str) -> str:
        return self._key("work", f"shard-{shard:05d}.{attempt}.errors.jsonl")

    def attempt_part(self, shard: int, attempt: str) -> str:
        return self._key("parts", f"part-{shard:05d}.{attempt}.parquet")

    def attempt_stats(self, shard: int, attempt: str) -> str:
        """The attempt's counts for the data report (``jobs/report/shard_stats.py``)."""
        return self._key("work", f"shard-{shard:05d}.{attempt}.stats.json")

    def carried_part(self, index: int) -> str:
        """Rows carried unchanged from the ``index``-th part of an earlier run (incremental jobs)."""
        return self._key("parts", f"carried-{index:05d}.parquet")

    @property
    def parts_prefix(self) -> str:
        return self._key("parts") + "/"

    @property
    def work_prefix(self) -> str:
        return self._key("work") + "/"

    @property
    def errors(self) -> str:
        return self._key("errors.jsonl")

    def webhook_event(self, name: str) -> str:
        """``webhooks/<name>.event.json``: one event of the job, written once before it is sent."""
        return self._key("webhooks", f"{name}.event.json")

    def webhook_outcome(self, name: str) -> str:
        """``webhooks/<name>.outcome.json``: how that event's delivery went (rewritten per attempt)."""
        return self._key("webhooks", f"{name}.outcome.json")

    @property
    def manifest(self) -> str:
        return self._key("manifest.json")

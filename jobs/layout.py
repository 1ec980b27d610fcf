"""Where a job's objects live in the store: one place builds every key."""
from __future__ import annotations

from dataclasses import dataclass

from storage import join_key


@dataclass(frozen=True)
class JobLayout:
    """``<prefix>/<job_id>/...``: spec, inline input, shards, parts, errors and the manifest."""

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
    def plan_errors(self) -> str:
        return self._key("work", "plan-errors.jsonl")

    def shard_input(self, shard: int) -> str:
        return self._key("work", f"shard-{shard:05d}.jsonl")

    def shard_errors(self, shard: int) -> str:
        return self._key("work", f"shard-{shard:05d}.errors.jsonl")

    def shard_done(self, shard: int) -> str:
        return self._key("work", f"shard-{shard:05d}.done.json")

    def part(self, shard: int) -> str:
        return self._key("parts", f"part-{shard:05d}.parquet")

    @property
    def errors(self) -> str:
        return self._key("errors.jsonl")

    @property
    def manifest(self) -> str:
        return self._key("manifest.json")

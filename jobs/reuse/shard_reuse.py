"""A shard's side of reuse: compute each text once, copy the rest, publish what others wait for.

Before its engine runs, a shard groups its records by content hash (the first of each group leads
it) and reads its section's decisions (``reuse_plan.py``) for the leaders:

- ``tenant``: the leader's result is read from the tenant's object (one read per object);
- ``follow``: the text's owner is an earlier record in another shard of ``owner_section``; the
  shard waits for that section's shards to commit (at most ``reuse_wait_s``) and reads the
  owners' results from their committed attempts' objects. Owners sit at earlier positions, so a
  shard only ever waits on earlier shards; a result not found (the owner failed, or the wait ran
  out) is computed here instead: reuse saves work, it never decides what a row holds.

Every record then gets its own row from its leader's result: a copy feeds ``task.append`` the
same arrays, so rows with one text are bit-identical. Afterwards the shard publishes what its
owners computed (for the job's followers) and, with ``reuse: "tenant"``, everything it computed.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from poolq.engine import EngineResult, PoolingOutput
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.planning_objects import REUSE_TABLE_NAME, PlanningObjects
from poolq.jobs.reuse.result_codec import decode_result, encode_result
from poolq.jobs.reuse.reuse_scope import JobReuse
from poolq.jobs.reuse.reuse_store import read_results, results_object
from poolq.storage import ObjectNotFoundError, read_embeddings


class RecordResult(NamedTuple):
    """One record's result, and whether it was copied (its leader's, or a stored one)."""

    record: InputRecord
    result: EngineResult
    reused: bool


@dataclass
class ShardCopies:
    """A shard's records sorted out: what to compute, what is copied, who shares whose text."""

    records: dict[str, InputRecord]
    compute: dict[str, InputRecord]
    copied: dict[str, PoolingOutput] = field(default_factory=dict)  # leader id -> stored result
    followers: dict[str, list[str]] = field(default_factory=dict)  # leader id -> same-text records after it
    owners: set[str] = field(default_factory=set)  # leaders whose results another shard waits for
    computed: dict[str, bytes] = field(default_factory=dict)  # content hash -> encoded result (for publishing)
    # Which fresh results are encoded for publishing: all of them for the tenant's store, else only the
    # owners' (a job-scoped reuse publishes nothing else, and encoding is per-document work on the hot loop).
    keep_all: bool = False

    def _published(self, leader: InputRecord) -> bool:
        return self.keep_all or leader.id in self.owners

    def results(self, fresh: Iterable[EngineResult], key_of: Callable[[EngineResult], str]) -> Iterator[RecordResult]:
        """Every record's result: the engine's ``fresh`` ones for the leaders it ran, then the copies."""
        for result in fresh:
            leader = self.records[key_of(result)]
            if isinstance(result, PoolingOutput) and self._published(leader):
                self.computed[leader.content_hash] = encode_result(result)
            yield RecordResult(leader, result, reused=False)
            yield from (RecordResult(self.records[other], result, True) for other in self.followers.get(leader.id, ()))
        for leader_id, result in self.copied.items():
            for record_id in (leader_id, *self.followers.get(leader_id, ())):
                yield RecordResult(self.records[record_id], result, True)


def no_copies(records: dict[str, InputRecord]) -> ShardCopies:
    return ShardCopies(records, records)


def sort_out(job: JobHandle, reuse: JobReuse, shard: int, records: dict[str, InputRecord],
             on_wait: Callable[[], None]) -> ShardCopies:
    """Group ``records`` by text and find the copies they can take (``on_wait``: called while waiting)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for record in records.values():
        groups[record.content_hash].append(record.id)
    copies = ShardCopies(records, {}, followers={ids[0]: ids[1:] for ids in groups.values() if len(ids) > 1},
                         keep_all=reuse.tenant is not None)
    leaders = {ids[0] for ids in groups.values()}
    section, _ = job.plan.shard_location(shard)
    decided = _decisions(job, section, leaders)
    tenant_wanted: dict[str, dict[str, str]] = defaultdict(dict)  # object -> content hash -> leader
    followed: dict[int, dict[str, str]] = defaultdict(dict)  # owner section -> content hash -> leader
    for leader_id, (kind, owner_section, stored_object) in decided.items():
        digest = records[leader_id].content_hash
        if kind == "owner":
            copies.owners.add(leader_id)
        elif kind == "tenant" and reuse.tenant is not None and reuse.tenant.holds(reuse.scope, stored_object):
            # planned under this shard's scope: a planner whose engine differs (another dtype) named another's
            tenant_wanted[stored_object][digest] = leader_id
        elif kind == "follow":
            followed[owner_section][digest] = leader_id
    for stored_object, wanted in tenant_wanted.items():
        _take(copies, wanted, reuse.tenant.read(stored_object, set(wanted)) if reuse.tenant else {})
    for owner_section, wanted in followed.items():
        _take(copies, wanted, _wait_for_owners(job, reuse, shard, owner_section, set(wanted), on_wait))
    copies.compute = {leader: records[leader] for leader in records if leader in leaders and leader not in copies.copied}
    return copies


def publish(job: JobHandle, reuse: JobReuse, shard: int, attempt: str, copies: ShardCopies) -> None:
    """Store what this attempt computed: its owners' results for the job's followers (under the
    attempt's own key: a follower reads the committed attempt's), everything for the tenant."""
    owned = {copies.records[leader].content_hash for leader in copies.owners}
    for_job = {digest: raw for digest, raw in copies.computed.items() if digest in owned}  # all of them without a tenant
    if for_job:
        section, _ = job.plan.shard_location(shard)
        job.ctx.store.put(reuse.shard_object(section, shard, attempt), results_object(for_job))
    if reuse.tenant is not None:
        reuse.tenant.publish(reuse.scope, copies.computed)


def _take(copies: ShardCopies, wanted: dict[str, str], found: dict[str, bytes]) -> None:
    for digest, raw in found.items():
        leader = wanted[digest]
        copies.copied[leader] = decode_result(raw, key=leader)


def _decisions(job: JobHandle, section: int, leaders: set[str]) -> dict[str, tuple[str, int, str]]:
    """The section's reuse decisions for ``leaders``: id -> (kind, owner section, object)."""
    try:
        table = read_embeddings(PlanningObjects(job.ctx.store, job.layout).get(section, REUSE_TABLE_NAME))
    except ObjectNotFoundError:
        return {}  # planned before reuse existed, or a task that is never reused
    mine = table.filter(pc.is_in(table.column("id"), value_set=pa.array(sorted(leaders), pa.string())))
    return {row["id"]: (row["kind"], row["owner_section"], row["object"]) for row in mine.to_pylist()}


def _wait_for_owners(job: JobHandle, reuse: JobReuse, shard: int, owner_section: int, wanted: set[str],
                     on_wait: Callable[[], None]) -> dict[str, bytes]:
    """The owners' results of ``wanted``, read from ``owner_section``'s committed shards as they
    commit; gives up when all of them committed or ``reuse_wait_s`` ran out."""
    counts = job.plan.section_shards
    first = sum(counts[:owner_section])
    pending = set(range(first, min(first + counts[owner_section], shard)))  # owners sit in earlier shards
    settings = job.ctx.settings
    deadline = time.monotonic() + settings.reuse.reuse_wait_s
    found: dict[str, bytes] = {}
    while True:
        for other in sorted(pending):
            commit = job.ledger.shard_commit(other)
            if commit is not None:
                pending.discard(other)
                found |= read_results(job.ctx.store, reuse.shard_object(owner_section, other, commit.attempt),
                                      wanted - found.keys())
        if len(found) == len(wanted) or not pending or time.monotonic() >= deadline:
            return found
        on_wait()
        time.sleep(settings.reuse.reuse_poll_s)

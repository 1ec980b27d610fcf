"""Which shard of which job a free worker runs next: fair share between tenants, then between a
tenant's jobs, weighted by estimated work. The interface and what both implementations share
(``redis_fair_share.py``, ``memory_fair_share.py``).

The discipline is start-time fair queuing, with virtual time counted in estimated tokens (a
shard's cost: its job's characters over its shards). Each tenant with shards left to run has a
virtual time, and so has each of its jobs. A free slot goes to the tenant furthest behind, and
within it to the job furthest behind; both advance by the cost of the shard they are given. So
two busy tenants get equal work whatever their jobs' sizes, and a tenant's jobs share its part
equally. A tenant (or job) that was idle starts at the current virtual time: waiting earns no
credit to burst with later.

Only as many shards are handed out as there are slots: ``capacity`` is about the compute workers
alive, so the broker holds a task for a worker about to be free, never a backlog of one job's
shards in front of another's. Shards are claimed in order from a cursor per job and stay in
flight until their commit is counted (``release``). Redis holds O(active jobs + workers), never
O(shards). The ledger stays the truth: after a Redis wipe a job starts again from shard 0, and
shards that were committed are counted without model work.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """A shard handed out to run."""

    job_id: str
    shard: int


class FairShare(ABC):
    @abstractmethod
    def open(self, job_id: str, tenant: str, num_shards: int, shard_cost: float) -> None:
        """The job's shards may run (it is planned). Idempotent: opening it again changes nothing,
        and a job once closed stays closed."""

    @abstractmethod
    def close(self, job_id: str) -> None:
        """No more shards of the job are handed out (cancelled, or finishing); those in flight stay
        until released."""

    @abstractmethod
    def claim(self, capacity: int) -> list[Claim]:
        """Hand out shards, fairly, until ``capacity`` shards (of every job) are in flight."""

    @abstractmethod
    def release(self, job_id: str, shard: int) -> None:
        """The shard's task is done (its commit is counted, or it will never run): its slot is free."""

    @abstractmethod
    def in_flight(self, job_id: str) -> list[int]:
        """The job's shards handed out and not yet released, in order."""

    @abstractmethod
    def in_flight_total(self) -> int:
        """Shards of every job handed out and not yet released."""

    @abstractmethod
    def cursor(self, job_id: str) -> int:
        """How many of the job's shards have been handed out so far."""

    @abstractmethod
    def forget(self, job_id: str) -> None:
        """The job is finished: drop its state, its shards still in flight included."""

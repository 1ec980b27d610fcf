"""Fair share in memory, for in-process runs and unit tests: the same discipline as Redis's."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from poolq.jobs.coordination.fair_share import Claim, FairShare


@dataclass
class _Job:
    tenant: str
    num_shards: int
    cost: float
    cursor: int = 0
    closed: bool = False
    in_flight: set[int] = field(default_factory=set)


class InMemoryFairShare(FairShare):
    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._tenant_time: dict[str, float] = {}  # tenants with shards to hand out -> virtual time
        self._job_time: dict[str, dict[str, float]] = {}  # tenant -> its jobs with shards left -> virtual time
        self._clock = 0.0  # the virtual time of the latest shard handed out
        self._lock = threading.Lock()

    def open(self, job_id: str, tenant: str, num_shards: int, shard_cost: float) -> None:
        with self._lock:
            job = self._jobs.setdefault(job_id, _Job(tenant, num_shards, max(shard_cost, 1.0)))
            if job.closed or job.cursor >= job.num_shards:
                return
            self._tenant_time.setdefault(tenant, self._clock)
            jobs = self._job_time.setdefault(tenant, {})
            jobs.setdefault(job_id, min(jobs.values(), default=0.0))

    def close(self, job_id: str) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                job.closed = True
                self._unschedule(job_id, job.tenant)

    def claim(self, capacity: int) -> list[Claim]:
        with self._lock:
            claims: list[Claim] = []
            while self._in_flight_total() < capacity and self._tenant_time:
                tenant = min(self._tenant_time, key=self._tenant_time.__getitem__)
                jobs = self._job_time[tenant]
                job_id = min(jobs, key=jobs.__getitem__)
                job = self._jobs[job_id]
                claims.append(Claim(job_id, job.cursor))
                job.in_flight.add(job.cursor)
                job.cursor += 1
                self._clock = self._tenant_time[tenant]
                self._tenant_time[tenant] += job.cost
                jobs[job_id] += job.cost
                if job.cursor >= job.num_shards:
                    self._unschedule(job_id, tenant)
            return claims

    def _unschedule(self, job_id: str, tenant: str) -> None:
        """The job has no shard left to hand out; a tenant without such jobs leaves the rotation."""
        jobs = self._job_time.get(tenant, {})
        jobs.pop(job_id, None)
        if not jobs:
            self._job_time.pop(tenant, None)
            self._tenant_time.pop(tenant, None)

    def release(self, job_id: str, shard: int) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                job.in_flight.discard(shard)

    def in_flight(self, job_id: str) -> list[int]:
        with self._lock:
            job = self._jobs.get(job_id)
            return sorted(job.in_flight) if job is not None else []

    def in_flight_total(self) -> int:
        with self._lock:
            return self._in_flight_total()

    def _in_flight_total(self) -> int:
        return sum(len(job.in_flight) for job in self._jobs.values())

    def cursor(self, job_id: str) -> int:
        with self._lock:
            job = self._jobs.get(job_id)
            return job.cursor if job is not None else 0

    def forget(self, job_id: str) -> None:
        with self._lock:
            job = self._jobs.pop(job_id, None)
            if job is not None:
                self._unschedule(job_id, job.tenant)

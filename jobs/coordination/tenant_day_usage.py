"""Tokens each tenant's jobs ran in one UTC day, for the operator's daily ceiling
(``Settings.limits.tenant_max_tokens_per_day``, docs/budgets.md).

A committed shard adds its ``tokens`` (what the model ran: reused and carried rows cost none) to the
day it is counted on, once however often its commit is reported (a redelivery, a recovery): the
counter keeps the units it has added. Both days' keys expire after two days: a day is only ever
read while it lasts.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from datetime import datetime, timedelta, timezone

_KEPT_S = 2 * 24 * 3600

# KEYS: the day's total, the day's counted units. ARGV: unit, tokens, ttl. Returns the day's total.
_ADD_LUA = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('INCRBY', KEYS[1], ARGV[2])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return tonumber(redis.call('GET', KEYS[1]) or '0')
"""


def utc_day(now: datetime) -> str:
    """The UTC day ``now`` falls on, as the counters name it: ``20261205``."""
    return now.astimezone(timezone.utc).strftime("%Y%m%d")


def seconds_to_day_end(now: datetime) -> int:
    """Whole seconds from ``now`` to the next midnight UTC (at least 1): a refusal's Retry-After."""
    utc = now.astimezone(timezone.utc)
    midnight = (utc + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((midnight - utc).total_seconds() + 0.999))


class TenantDayUsage(ABC):
    """Per tenant, per UTC day: the tokens its committed units ran."""

    @abstractmethod
    def add(self, tenant: str, unit: str, tokens: int, now: datetime) -> int:
        """Add ``tokens`` of ``unit`` (``<job id>/<shard>``) to ``tenant``'s day once; returns the day's total."""

    @abstractmethod
    def total(self, tenant: str, now: datetime) -> int:
        """``tenant``'s tokens on the UTC day of ``now``."""


class InMemoryTenantDayUsage(TenantDayUsage):
    """One process's counters (a job run in this process)."""

    def __init__(self) -> None:
        self._totals: dict[tuple[str, str], int] = {}
        self._units: dict[tuple[str, str], set[str]] = {}
        self._lock = threading.Lock()

    def add(self, tenant: str, unit: str, tokens: int, now: datetime) -> int:
        day = (tenant, utc_day(now))
        with self._lock:
            units = self._units.setdefault(day, set())
            if unit not in units:
                units.add(unit)
                self._totals[day] = self._totals.get(day, 0) + tokens
            return self._totals.get(day, 0)

    def total(self, tenant: str, now: datetime) -> int:
        with self._lock:
            return self._totals.get((tenant, utc_day(now)), 0)


class RedisTenantDayUsage(TenantDayUsage):
    """``poolq:tenant_tokens:<tenant>:<day>`` (the total) and ``...:units`` (what it counted), shared by every process."""

    def __init__(self, redis_client) -> None:
        self.redis = redis_client
        self._add = redis_client.register_script(_ADD_LUA)

    @staticmethod
    def _key(tenant: str, now: datetime) -> str:
        return f"poolq:tenant_tokens:{tenant}:{utc_day(now)}"

    def add(self, tenant: str, unit: str, tokens: int, now: datetime) -> int:
        key = self._key(tenant, now)
        return int(self._add(keys=[key, f"{key}:units"], args=[unit, int(tokens), _KEPT_S]))

    def total(self, tenant: str, now: datetime) -> int:
        raw = self.redis.get(self._key(tenant, now))
        return int(raw) if raw is not None else 0

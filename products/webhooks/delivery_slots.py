"""How many of one tenant's webhook deliveries are in flight, over every webhook worker.

A delivery takes one of its tenant's slots before it connects and gives it back when its attempt
ends; with the tenant's ``limit`` taken it waits its turn (``tenant_turns.py``), so a tenant whose
receivers trickle or never answer holds at most ``limit`` of the webhook workers' threads. A slot
expires after ``ttl_s`` (longer than an attempt can take): a worker killed mid-attempt frees it
then, without anyone giving it back.
"""
from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from typing import Callable


class DeliverySlots(ABC):
    @abstractmethod
    def take(self, tenant: str, limit: int, ttl_s: float) -> str | None:
        """A slot of ``tenant``'s (its token) if fewer than ``limit`` are taken, else None."""

    @abstractmethod
    def give_back(self, tenant: str, token: str) -> None:
        """End the slot ``token`` (a slot already expired is a no-op)."""

    @abstractmethod
    def in_flight(self, tenant: str) -> int:
        """``tenant``'s slots taken and not expired."""


def _new_token() -> str:
    return uuid.uuid4().hex


# KEYS[1] the tenant's sorted set (token -> when it expires); ARGV: now, limit, expiry, token, key ttl ms.
_TAKE_LUA = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""


class RedisDeliverySlots(DeliverySlots):
    """``poolq:webhooks:in_flight:<tenant>``: a sorted set of tokens scored by their expiry (wall
    clock, as the leases'), checked and added in one script, so two workers never both take the last."""

    def __init__(self, redis_client, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis_client
        self._clock = clock
        self._take = redis_client.register_script(_TAKE_LUA)

    @staticmethod
    def _key(tenant: str) -> str:
        return f"poolq:webhooks:in_flight:{tenant}"

    def take(self, tenant: str, limit: int, ttl_s: float) -> str | None:
        now, token = self._clock(), _new_token()
        args = [repr(now), limit, repr(now + ttl_s), token, int(ttl_s * 1000)]
        return token if int(self._take(keys=[self._key(tenant)], args=args)) else None

    def give_back(self, tenant: str, token: str) -> None:
        self.redis.zrem(self._key(tenant), token)

    def in_flight(self, tenant: str) -> int:
        return int(self.redis.zcount(self._key(tenant), f"({self._clock()!r}", "+inf"))


class InMemoryDeliverySlots(DeliverySlots):
    """The same in one process (unit tests)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slots: dict[str, dict[str, float]] = {}  # tenant -> token -> when it expires
        self._lock = threading.Lock()

    def _live(self, tenant: str) -> dict[str, float]:
        now = self._clock()
        slots = {token: expiry for token, expiry in self._slots.get(tenant, {}).items() if expiry > now}
        self._slots[tenant] = slots
        return slots

    def take(self, tenant: str, limit: int, ttl_s: float) -> str | None:
        with self._lock:
            slots = self._live(tenant)
            if len(slots) >= limit:
                return None
            token = _new_token()
            slots[token] = self._clock() + ttl_s
            return token

    def give_back(self, tenant: str, token: str) -> None:
        with self._lock:
            self._slots.get(tenant, {}).pop(token, None)

    def in_flight(self, tenant: str) -> int:
        with self._lock:
            return len(self._live(tenant))

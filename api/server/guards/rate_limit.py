"""Token-bucket rate limits in Redis (shared by all API processes): per tenant, and per client
address for failed authentications."""
from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: int = 0  # whole seconds until one request is allowed again


class RateLimiter(ABC):
    """``rate_per_s`` sustained, bursts up to ``burst``."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst

    def take(self, key: str) -> RateDecision:
        """Spend one token of ``key``'s bucket if it has one."""
        return self._spend(key, 1)

    def peek(self, key: str) -> RateDecision:
        """Whether ``key``'s bucket has a token, spending none."""
        return self._spend(key, 0)

    @abstractmethod
    def _spend(self, key: str, cost: int) -> RateDecision: ...

    def _retry_after(self, tokens: float) -> int:
        return max(1, math.ceil((1 - tokens) / self.rate_per_s))


# KEYS[1] bucket; ARGV rate, burst, now, cost. Returns {allowed, tokens*1000}.
_TAKE_LUA = """
local rate, burst, now, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - cost; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', now)
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return {allowed, math.floor(tokens * 1000)}
"""


class RedisRateLimiter(RateLimiter):
    def __init__(self, redis_client, rate_per_s: float, burst: int, namespace: str = "ratelimit") -> None:
        super().__init__(rate_per_s, burst)
        self._take = redis_client.register_script(_TAKE_LUA)
        self._prefix = f"poolq:{namespace}:"

    def _spend(self, key: str, cost: int) -> RateDecision:
        allowed, millitokens = self._take(keys=[self._prefix + key], args=[self.rate_per_s, self.burst, time.time(), cost])
        return RateDecision(True) if allowed else RateDecision(False, self._retry_after(millitokens / 1000))


class InMemoryRateLimiter(RateLimiter):
    def __init__(self, rate_per_s: float, burst: int, clock=time.monotonic) -> None:
        super().__init__(rate_per_s, burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _spend(self, key: str, cost: int) -> RateDecision:
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(self.burst, tokens + (now - at) * self.rate_per_s)
            if tokens >= 1:
                self._buckets[key] = (tokens - cost, now)
                return RateDecision(True)
            self._buckets[key] = (tokens, now)
            return RateDecision(False, self._retry_after(tokens))

"""Redis: the broker, the live job state, and every client's deadlines on it."""
from __future__ import annotations

import redis
from pydantic import Field
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from poolq.jobs.settings.group import Role, SettingsGroup


class BrokerSettings(SettingsGroup):
    """Where Redis is and how long a command may take (README, "Deadlines"): a stalled Redis is an error
    after these, classified retryable; on the API's request path a 503, in a worker a retry."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_connect_timeout_s: float = Field(2.0, gt=0, description="connecting to Redis (and the broker)")
    redis_api_timeout_s: float = Field(2.0, gt=0, description="the API waits this long for a Redis answer")
    redis_worker_timeout_s: float = Field(10.0, gt=0, description="workers and beat wait this long for a Redis answer")
    redis_retries: int = Field(1, ge=0, description="retries of a Redis command that lost its connection (in workers "
                               "and beat also of one that timed out; the API answers 503 at the first deadline)")
    redis_health_check_interval_s: int = Field(30, ge=0, description="workers and beat check (PING) a connection idle "
                                               "this long before using it again; the API does not: on a stalled Redis "
                                               "the check and its retries come on top of the command's")

    def redis_timeout_s(self, role: Role = "worker") -> float:
        return self.redis_api_timeout_s if role == "api" else self.redis_worker_timeout_s

    def redis_health_check_interval(self, role: Role = "worker") -> int:
        return 0 if role == "api" else self.redis_health_check_interval_s

    def redis_options(self, role: Role = "worker") -> dict:
        """redis-py's connection options for ``role``: deadlines, bounded retries, health checks."""
        return {
            "socket_connect_timeout": self.redis_connect_timeout_s,
            "socket_timeout": self.redis_timeout_s(role),
            "health_check_interval": self.redis_health_check_interval(role),
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.1), self.redis_retries, supported_errors=(
                (redis.exceptions.ConnectionError,) if role == "api" else
                (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError))),
        }

    def redis_client(self, role: Role = "worker") -> redis.Redis:
        """A client of ``redis_url`` whose every command has a deadline (``redis_options``)."""
        return redis.Redis.from_url(self.redis_url, **self.redis_options(role))

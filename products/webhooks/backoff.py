"""How long delivery waits before the next attempt: exponential, capped, for a bounded time."""
from __future__ import annotations


def backoff_s(attempts: int, base_s: float, max_s: float) -> float:
    """The wait after ``attempts`` failed attempts (1, 2, ...): base, 2 x base, 4 x base ..., at most ``max_s``."""
    return min(max_s, base_s * 2 ** max(0, attempts - 1))


def next_attempt_in(attempts: int, elapsed_s: float, base_s: float, max_s: float, retry_for_s: float) -> float | None:
    """Seconds until the next attempt after ``attempts`` failures, ``elapsed_s`` after the event;
    None when that attempt would come after ``retry_for_s`` (delivery gives up)."""
    wait = backoff_s(attempts, base_s, max_s)
    return wait if elapsed_s + wait <= retry_for_s else None

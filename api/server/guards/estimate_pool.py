"""Where a submission's checks run: never on the event loop, and in the estimate pool when they estimate.

A body with a token budget (``limits.max_tokens``) is checked by estimating it: its input read and a
sample tokenized, for up to ``estimate_max_seconds``. Every such pass, whichever route asks for it
(``POST /v1/jobs``, ``/validate``, ``/estimate``, ``/v1/schedules``), runs in the estimate pool
(``estimate_concurrency`` at once, ``app.state.estimates``): a tenant cannot run more at once by
attaching budgets, nor fill the threads every other request runs on. The other checks (a Hub model
is pinned to its commit there: a download) run on the default threads.
"""
from __future__ import annotations

from typing import Callable, TypeVar

import anyio
from fastapi import Request

Checked = TypeVar("Checked")


async def run_checks(request: Request, work: Callable[[], Checked], *, estimates: bool) -> Checked:
    """``work`` on a thread: in the estimate pool if it ``estimates``, else on the default threads."""
    limiter: anyio.CapacityLimiter | None = request.app.state.estimates if estimates else None
    return await anyio.to_thread.run_sync(work, limiter=limiter)

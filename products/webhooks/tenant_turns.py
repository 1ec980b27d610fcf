"""A delivery in its tenant's turn: at most ``webhook_tenant_concurrency`` of one tenant's attempts
run at once over every webhook worker (``delivery_slots.py``). A delivery that finds its tenant's
slots taken is sent again, the same attempt, after about ``webhook_busy_retry_s``: it waits on its
own tenant's receivers and holds no thread meanwhile, so another tenant's deliveries find the
webhook workers' threads free.
"""
from __future__ import annotations

import logging
import random
from typing import Callable

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.products.webhooks.delivery import deliver_event
from poolq.products.webhooks.delivery_slots import DeliverySlots

log = logging.getLogger(__name__)

# A slot outlives its attempt's HTTP deadline by this much: the name's resolution, the tenant's
# secret and the outcome's write have their own (store) deadlines. Past it, a worker that died
# mid-attempt no longer holds its tenant's slot.
SLOT_MARGIN_S = 30.0


def slot_ttl_s(settings: Settings) -> float:
    """How long a delivery holds its slot at most: the sender's whole-request deadline, and a margin."""
    return settings.webhooks.webhook_connect_timeout_s + settings.webhooks.webhook_read_timeout_s + SLOT_MARGIN_S


def busy_wait_s(settings: Settings, jitter: float) -> float:
    """When a delivery that found its tenant's slots taken tries again: ``webhook_busy_retry_s``
    spread over half to one and a half times it (``jitter`` in [0, 1)), so waiting ones do not come back together."""
    return settings.webhooks.webhook_busy_retry_s * (0.5 + jitter)


def deliver_in_turn(ctx: JobContext, slots: DeliverySlots, job_id: str, name: str, attempt: int,
                    deliver: Callable[..., float | None] = deliver_event,
                    jitter: Callable[[], float] = random.random) -> None:
    """Make attempt ``attempt`` of the job's event ``name`` if its tenant has a slot free, then queue
    the next attempt (if one is due); else queue this attempt again, shortly."""
    settings = ctx.settings
    tenant = JobHandle.bind(ctx, job_id).tenant  # JobNotFound for no such job: nothing to deliver
    token = slots.take(tenant, settings.webhooks.webhook_tenant_concurrency, slot_ttl_s(settings))
    if token is None:
        log.debug("job %s: webhook %s waits for one of tenant %s's deliveries to end", job_id, name, tenant)
        ctx.enqueuer.deliver_webhook(job_id, name, attempt, busy_wait_s(settings, jitter()))
        return
    try:
        wait = deliver(ctx, job_id, name, attempt=attempt)
    finally:
        slots.give_back(tenant, token)
    if wait is not None:
        ctx.enqueuer.deliver_webhook(job_id, name, attempt + 1, wait)

"""Deliveries in their tenant's turn: a tenant with its deliveries in flight waits (the same attempt sent
again shortly, no thread held); another tenant's delivery goes at once; a slot is given back however
the attempt ends, and the next attempt is queued with the back-off."""
import threading
from types import SimpleNamespace

import pytest
from support.job_doubles import RecordingEnqueuer

from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.settings import Settings
from poolq.products.webhooks.delivery_slots import InMemoryDeliverySlots
from poolq.products.webhooks.tenant_turns import busy_wait_s, deliver_in_turn, slot_ttl_s

TENANTS = {"job-a1": "a", "job-a2": "a", "job-a3": "a", "job-b1": "b"}


def _ctx(**settings):
    return SimpleNamespace(settings=Settings(webhook_tenant_concurrency=2, webhook_busy_retry_s=1.0, **settings),
                           enqueuer=RecordingEnqueuer(), tenant_of=TENANTS.get, service_layout=ServiceLayout("p"),
                           store=None)


class HangingReceivers:
    """``deliver`` doubles whose attempts of tenant a hang until released (a receiver that never answers)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started: list[str] = []
        self.entered = threading.Semaphore(0)

    def __call__(self, ctx, job_id, name, *, attempt):
        self.started.append(job_id)
        self.entered.release()
        if TENANTS[job_id] == "a":
            self.release.wait(10)
        return None


def test_a_tenant_with_its_deliveries_in_flight_waits_and_another_tenant_goes_at_once():
    ctx, slots, receivers = _ctx(), InMemoryDeliverySlots(), HangingReceivers()
    hanging = [threading.Thread(target=deliver_in_turn, args=(ctx, slots, job, "job-ended", 0, receivers))
               for job in ("job-a1", "job-a2")]
    for thread in hanging:
        thread.start()
    for _ in hanging:
        assert receivers.entered.acquire(timeout=5)
    # a's third waits its turn: not attempted, the same attempt queued again in 0.5 to 1.5 s
    deliver_in_turn(ctx, slots, "job-a3", "job-ended", 3, receivers, jitter=lambda: 0.25)
    assert "job-a3" not in receivers.started
    assert ctx.enqueuer.take() == [("webhook", "job-a3", "job-ended", 3, 0.75)]
    # b's goes now, while a's receivers hang
    deliver_in_turn(ctx, slots, "job-b1", "job-ended", 0, receivers)
    assert receivers.started[-1] == "job-b1" and slots.in_flight("b") == 0
    receivers.release.set()
    for thread in hanging:
        thread.join(5)
    assert slots.in_flight("a") == 0  # both given back: a's next delivery goes
    deliver_in_turn(ctx, slots, "job-a3", "job-ended", 3, receivers)
    assert receivers.started[-1] == "job-a3"


def test_the_slot_is_given_back_when_the_attempt_raises_and_the_next_attempt_is_queued():
    ctx, slots = _ctx(), InMemoryDeliverySlots()

    def store_down(ctx, job_id, name, *, attempt):
        raise ConnectionError("the store is away")

    with pytest.raises(ConnectionError):
        deliver_in_turn(ctx, slots, "job-a1", "job-ended", 0, store_down)
    assert slots.in_flight("a") == 0 and ctx.enqueuer.take() == []
    deliver_in_turn(ctx, slots, "job-a1", "job-ended", 4, lambda ctx, job_id, name, *, attempt: 80.0)
    assert ctx.enqueuer.take() == [("webhook", "job-a1", "job-ended", 5, 80.0)]


def test_a_slot_outlives_the_whole_request_and_waits_are_spread():
    settings = Settings(webhook_connect_timeout_s=2, webhook_read_timeout_s=5, webhook_busy_retry_s=2)
    assert slot_ttl_s(settings) > 2 + 5
    assert [busy_wait_s(settings, jitter) for jitter in (0.0, 0.5, 0.999)] == [1.0, 2.0, pytest.approx(2.998)]

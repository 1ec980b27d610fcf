"""``job.running``: the event a job's webhook gets once the job is planned, when its place in fair
share is first known (docs/webhooks.md#jobrunning). Opt-in (``webhook.send_running``): receivers
written for one event at the job's end may take any event for the end.

Its ``data`` holds the status' own fields, serialized as ``GET /v1/jobs/{id}`` serializes them
(``queue`` is the status' ``JobPlace``: jobs ahead, tenant share, fleet tokens/s, ETA), read the
same way at the moment it is queued, so a receiver and a poll at that moment see the same numbers.
Sent once per job: a planner that runs again (a redelivered task) queues the same event.
"""
from __future__ import annotations

import logging

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.spec.webhook import WebhookOutcome
from poolq.jobs.status.current_status import current_status
from poolq.products.webhooks.events import send_job_event

log = logging.getLogger(__name__)

RUNNING = "job.running"
FIELDS = frozenset({"status", "model", "task", "counts", "estimate", "queue"})


def running_data(status: JobStatus) -> dict:
    """The event's ``data``: the job's id and its status' ``FIELDS``, as the status API writes them."""
    return {"job_id": status.id, **status.model_dump(mode="json", include=set(FIELDS))}


def announce_job_running(job: JobHandle) -> WebhookOutcome | None:
    """Queue ``job.running`` when the job's webhook asks for it and the job is still queued or running
    (a job cancelled or finished meanwhile has no place: its end event says the rest); else None.
    Never raises for the webhook (``send_job_event``)."""
    target = job.spec.webhook
    if target is None or not target.send_running:
        return None
    try:
        status = current_status(job)
    except Exception:  # noqa: BLE001 - never fail the planner for its webhook
        log.warning("job %s: %s not queued: its status could not be read", job.id, RUNNING, exc_info=True)
        return None
    if status is None or status.queue is None:
        return None
    return send_job_event(job, RUNNING, running_data(status))

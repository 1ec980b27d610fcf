"""Queuing a job's events for delivery: the job's end (``announce_job_end``, from the finalizer)
and any other step's (``send_job_event``: a sink's load, ...).

An event is written to the job's ledger first (once: a repeated call queues the same event, same
id), then its delivery task is sent. A webhook never fails the job: ``send_job_event`` never
raises (what went wrong is logged); ``announce_job_end`` raises only for an outage, when the
event could not be written (StorageError) or its delivery task not sent (``WebhookNotQueued``:
the broker), so that the finalizer's clean-up waits
and the event is queued again (the finalize task's retry, else the reconciler's next pass over the
job, which is still active until then). The job's end is recorded before either is called.
"""
from __future__ import annotations

import hashlib
import logging
import re
import time
from datetime import datetime, timezone

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.spec.webhook import WebhookEvent, WebhookOutcome
from poolq.products.webhooks.delivery import show_on_status
from poolq.storage import StorageError

log = logging.getLogger(__name__)

EVENT_TYPE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")  # job.succeeded, sink.load_ended


class WebhookNotQueued(ConnectionError):
    """The event is in the ledger but its delivery task could not be sent (the broker): a
    ConnectionError, so the step is retried as for any outage (jobs/steps/failures.py)."""


def event_id(job_id: str, name: str) -> str:
    """The event's ``webhook-id``: the same for every attempt and every repeated queuing."""
    return "msg_" + hashlib.sha256(f"{job_id}\n{name}".encode()).hexdigest()[:32]


def event_name(event_type: str, key: str = "") -> str:
    """The event's name in the ledger: its type, and a digest of ``key`` when one type may happen
    more than once per job (a sink's loads: key = the sink and the load's attempt)."""
    return event_type + (f".{hashlib.sha256(key.encode()).hexdigest()[:16]}" if key else "")


def send_job_event(job: JobHandle, event_type: str, data: dict, *, key: str = "") -> WebhookOutcome | None:
    """Queue ``event_type`` of ``job`` with ``data`` for its webhook; None if the job names no
    webhook (or queuing failed: logged). Call it after what the event reports is durably recorded.
    The same (``event_type``, ``key``) queues one event, however often it is called."""
    if not EVENT_TYPE.match(event_type):
        raise ValueError(f"event type {event_type!r}: dotted lowercase words, e.g. 'sink.load_ended'")
    try:
        return _queue_if_wanted(job, event_name(event_type, key), event_type, data)
    except Exception:  # noqa: BLE001 - never fail the job's step for its webhook
        log.warning("job %s: webhook event %s not queued", job.id, event_type, exc_info=True)
        return None


def _queue_if_wanted(job: JobHandle, name: str, event_type: str, data: dict) -> WebhookOutcome | None:
    target = job.spec.webhook
    return None if target is None else _queue(job, name, event_type, data, target.url)


def announce_job_end(job: JobHandle, manifest: JobManifest) -> WebhookOutcome | None:
    """Queue ``job.<state>`` (succeeded, partially_succeeded, failed, cancelled) for the job's
    webhook; WebhookNotQueued if its delivery task could not be sent (retry: it is idempotent)."""
    data = {
        "job_id": job.id,
        "status": manifest.status.value,
        "model": manifest.model,
        "task": manifest.task,
        "counts": manifest.counts.model_dump(mode="json"),
        "usage": manifest.usage.model_dump(mode="json"),
        "error": manifest.error,
        "finished_at": manifest.finished_at.isoformat() if manifest.finished_at else None,
        "manifest_uri": job.ctx.store.uri(job.layout.manifest),
    }
    try:
        return _queue_if_wanted(job, JOB_ENDED, f"job.{manifest.status.value}", data)
    except (WebhookNotQueued, StorageError):  # an outage: the caller's retry (or the reconciler) queues it
        raise
    except Exception:  # noqa: BLE001 - anything else about the webhook never holds up the job
        log.warning("job %s: its end's webhook event not queued", job.id, exc_info=True)
        return None


def _queue(job: JobHandle, name: str, event_type: str, data: dict, url: str) -> WebhookOutcome:
    ctx = job.ctx
    records = WebhookRecords(ctx.store, job.layout)
    now = time.time()
    payload = {"type": event_type, "timestamp": datetime.fromtimestamp(now, timezone.utc).isoformat(), "data": data}
    event = records.put_event(name, WebhookEvent(id=event_id(job.id, name), type=event_type, created_at=now,
                                                 url=url, payload=payload))
    attempted = records.outcome(name)
    if attempted is not None:
        return attempted  # its delivery task runs (or ran): its retries carry it
    outcome = WebhookOutcome(event_id=event.id, type=event.type)
    try:
        ctx.enqueuer.deliver_webhook(job.id, name)
    except NotImplementedError:
        outcome = outcome.model_copy(update={"state": "failed", "error": "this runner delivers no webhooks "
                                             "(in-process runs); submit the job to a poolq service"})
        records.write_outcome(name, outcome)
    except Exception as exc:
        raise WebhookNotQueued(f"job {job.id}: webhook event {event.id} not queued: {exc}") from exc
    show_on_status(ctx, job.id, name, outcome)
    return outcome

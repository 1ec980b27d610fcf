"""Delivering one event: one signed attempt, its outcome recorded in the ledger (and on the job's
status), and when the next attempt is due. The Celery task (``worker/celery_tasks.py``) calls
``deliver_event`` and re-sends itself after the delay it returns.

Delivery is at least once: every attempt carries the event's id (``webhook-id``), so a receiver
drops repeats. A 2xx answer delivers it; a redirect (never followed), 410 Gone, a refused URL or
address, or a request that cannot be made ends it as failed; no answer or another status is retried
with exponential back-off until ``webhook_retry_for_s`` after the event (``unanswered`` and
``answered`` classify each attempt, once).
"""
from __future__ import annotations

import http.client
import logging
import time
from dataclasses import dataclass
from typing import Callable

from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.settings import Settings
from poolq.jobs.spec.webhook import WebhookEvent, WebhookOutcome
from poolq.products.webhooks.address_check import Resolver, pinned_address, resolve
from poolq.products.webhooks.allow_list import AllowList
from poolq.products.webhooks.backoff import next_attempt_in
from poolq.products.webhooks.sender import Answer, HttpSender, WebhookSender
from poolq.products.webhooks.signing import signed_headers
from poolq.products.webhooks.webhook_secrets import WebhookSecretStore
from poolq.products.webhooks.webhook_url import WebhookRefused

log = logging.getLogger(__name__)
GONE = 410  # the receiver says it will never want this event


@dataclass(frozen=True)
class Attempt:
    status: int | None  # the receiver's answer, None if none came
    error: str | None
    final: bool  # another attempt would not change it

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def sender_for(settings: Settings) -> WebhookSender:
    return HttpSender(settings.webhooks.webhook_connect_timeout_s, settings.webhooks.webhook_read_timeout_s,
                      settings.webhooks.webhook_max_response_bytes)


def attempt_delivery(event: WebhookEvent, signing_secrets: list[str], allow: AllowList, sender: WebhookSender,
                     now: float, resolver: Resolver = resolve) -> Attempt:
    """One signed POST of ``event``, if its URL is allowed and its address may be reached now."""
    try:
        url, entry = allow.entry_for(event.url)  # the allow-list of now: the operator may have narrowed it
        address = pinned_address(url, entry, resolver)
        body = event.body()
        answer = sender.post(url, address, signed_headers(signing_secrets, event.id, int(now), body), body)
    except Exception as exc:  # noqa: BLE001 - each is classified once, below: none leaves the outcome unwritten
        return unanswered(exc)
    return answered(answer)


# Failures that may pass: no answer now (refused, timed out, a name that does not resolve), one may
# come later. Checked after NEVER_SENDABLE: http.client's InvalidURL is an HTTPException.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OSError, http.client.HTTPException)
# A request that cannot be made (a URL http.client refuses): the next attempt would fail the same way.
NEVER_SENDABLE: tuple[type[Exception], ...] = (http.client.InvalidURL,)


def unanswered(exc: Exception) -> Attempt:
    """An attempt that got no answer, classified: refused (the allow-list or the address check) and
    anything not transient are final; a transient failure is retried."""
    if isinstance(exc, WebhookRefused):
        return Attempt(None, f"refused: {exc}", final=True)
    if isinstance(exc, TRANSIENT_ERRORS) and not isinstance(exc, NEVER_SENDABLE):
        return Attempt(None, f"no answer: {type(exc).__name__}: {exc}", final=False)
    log.warning("webhook request cannot be sent: %s: %s", type(exc).__name__, exc)
    return Attempt(None, f"cannot be sent: {type(exc).__name__}: {exc}", final=True)


def answered(answer: Answer) -> Attempt:
    """An attempt the receiver answered: 2xx delivers; a redirect and 410 Gone end it; else retried."""
    if 200 <= answer.status < 300:
        return Attempt(answer.status, None, final=True)
    if 300 <= answer.status < 400:
        return Attempt(answer.status, f"redirect to {answer.location!r} not followed", final=True)
    return Attempt(answer.status, f"HTTP {answer.status}: {answer.excerpt}".rstrip(": "), final=answer.status == GONE)


def deliver_event(ctx: JobContext, job_id: str, name: str, *, attempt: int | None = None,
                  sender: WebhookSender | None = None, resolver: Resolver = resolve,
                  clock: Callable[[], float] = time.time) -> float | None:
    """Attempt event ``name`` of ``job_id`` unless its delivery is over; returns the seconds until
    the next attempt, or None when there is none (delivered, failed, no such event).

    With ``attempt`` (the task's: 0, 1, ...) a message for an attempt already made sends nothing:
    a message queued twice starts one chain of retries, not two. If it was the latest attempt,
    the wait for the next is returned again (the task that made it may have died before queuing
    it; a duplicate of that next message is dropped the same way)."""
    job = JobHandle.bind(ctx, job_id)
    records = WebhookRecords(ctx.store, job.layout)
    event = records.event(name)
    if event is None:
        log.warning("job %s: no webhook event %s to deliver", job_id, name)
        return None
    outcome = records.outcome(name) or WebhookOutcome(event_id=event.id, type=event.type)
    settings = ctx.settings
    now = clock()
    if outcome.is_final or (attempt is not None and attempt != outcome.attempts - 1 and attempt != outcome.attempts):
        return None  # delivered or given up; or an older attempt's duplicate
    if attempt is not None and attempt == outcome.attempts - 1:  # made already: queue its successor again
        return next_attempt_in(outcome.attempts, now - event.created_at, settings.webhooks.webhook_retry_base_s,
                               settings.webhooks.webhook_retry_max_s, settings.webhooks.webhook_retry_for_s)
    signing = WebhookSecretStore(ctx.store, settings.storage.output_prefix).ensure(job.tenant).signing(now)
    made = attempt_delivery(event, signing, AllowList.parse(settings.webhooks.webhook_allow),
                            sender or sender_for(settings), now, resolver)
    attempts = outcome.attempts + 1
    wait = None if made.final else next_attempt_in(attempts, now - event.created_at, settings.webhooks.webhook_retry_base_s,
                                                   settings.webhooks.webhook_retry_max_s, settings.webhooks.webhook_retry_for_s)
    state = "delivered" if made.delivered else "pending" if wait is not None else "failed"
    error = made.error if wait is not None or made.final else f"gave up after {attempts} attempts: {made.error}"
    outcome = outcome.model_copy(update={"state": state, "attempts": attempts, "last_status": made.status,
                                         "error": error})
    records.write_outcome(name, outcome)
    show_on_status(ctx, job_id, name, outcome)
    log.info("job %s: webhook %s (%s) attempt %d: %s", job_id, event.id, event.type, attempts, error or state)
    return wait


def show_on_status(ctx: JobContext, job_id: str, name: str, outcome: WebhookOutcome) -> None:
    """The job-end event's outcome on the cached status (the ledger's record is the truth; a status
    whose record expired is rebuilt from it, so none is made here)."""
    if name != JOB_ENDED:
        return
    try:
        if ctx.status.field(job_id, "status") is not None:
            ctx.status.update(job_id, webhook=outcome.model_dump_json())
    except Exception:  # noqa: BLE001 - the cache is best effort; the ledger has the outcome
        log.warning("job %s: webhook outcome not cached", job_id, exc_info=True)

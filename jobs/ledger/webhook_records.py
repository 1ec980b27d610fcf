"""A job's webhook events and their delivery outcomes in the ledger (``webhooks/`` under the job)."""
from __future__ import annotations

import logging

from pydantic import ValidationError

from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.spec.webhook import WebhookEvent, WebhookOutcome
from poolq.storage import ObjectNotFoundError, ObjectStore

log = logging.getLogger(__name__)

JOB_ENDED = "job-ended"  # the name of a job's end event: its outcome is the status' ``webhook``


class WebhookRecords:
    def __init__(self, store: ObjectStore, layout: JobLayout) -> None:
        self.store = store
        self.layout = layout

    def put_event(self, name: str, event: WebhookEvent) -> WebhookEvent:
        """Write ``event`` unless one of that name exists; returns the one stored (the first)."""
        if self.store.put_once(self.layout.webhook_event(name), event.model_dump_json().encode()):
            return event
        stored = self.event(name)
        if stored is None:  # pragma: no cover - written a moment ago: only a store that loses objects
            raise RuntimeError(f"webhook event {name} of job {self.layout.job_id} cannot be read back")
        return stored

    def event(self, name: str) -> WebhookEvent | None:
        return self._read(self.layout.webhook_event(name), WebhookEvent)

    def outcome(self, name: str) -> WebhookOutcome | None:
        return self._read(self.layout.webhook_outcome(name), WebhookOutcome)

    def write_outcome(self, name: str, outcome: WebhookOutcome) -> None:
        self.store.put(self.layout.webhook_outcome(name), outcome.model_dump_json().encode())

    def _read(self, key: str, model: type[WebhookEvent] | type[WebhookOutcome]):
        try:
            return model.model_validate_json(self.store.get(key))
        except ObjectNotFoundError:
            return None
        except ValidationError:
            log.warning("webhook record %s is not one: ignored", key)
            return None

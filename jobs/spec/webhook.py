"""A job's webhook: where its events go (``JobSpec.webhook``) and how their delivery went (status ``webhook``).

Events are signed as the Standard Webhooks spec says (``products/webhooks/signing.py``); docs/webhooks.md
describes the events, headers, retries and the operator's allow-list.
"""
from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# pending: not sent yet, or a retry is waiting; delivered: a 2xx answer; failed: given up (or refused).
DeliveryState = Literal["pending", "delivered", "failed"]
MAX_URL_CHARS = 2048


class WebhookTarget(BaseModel):
    """``webhook: {"url": ..., "send_running": false}`` of a job or a schedule: poolq POSTs its events there."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=MAX_URL_CHARS,
                     description="http(s) URL the job's events are POSTed to; it must match the operator's "
                                 "allow-list (POOLQ_WEBHOOK_ALLOW)")
    # Opt-in: receivers written for "one event when the job ends" may take any event for the end.
    send_running: bool = Field(False, description="also POST job.running once the job is planned: its place in "
                                                  "fair share (queue: jobs ahead, share, fleet tokens/s, ETA)")


class WebhookOutcome(BaseModel):
    """How one event's delivery went: the status' and the ledger's ``webhook`` block."""

    event_id: str  # the webhook-id header: the same on every attempt
    type: str  # the event's type, e.g. job.succeeded
    state: DeliveryState = "pending"
    attempts: int = 0
    last_status: int | None = None  # the receiver's last HTTP status (None: no answer)
    error: str | None = None  # why the last attempt failed, or why delivery was refused

    @property
    def is_final(self) -> bool:
        return self.state != "pending"


class WebhookEvent(BaseModel):
    """One event, written once to the job's ledger before it is sent: every attempt sends the same
    id and body (only ``webhook-timestamp`` and the signature change)."""

    id: str
    type: str
    created_at: float  # unix seconds: retries stop webhook_retry_for_s after it
    url: str
    payload: dict  # the body: {"type", "timestamp", "data"}

    def body(self) -> bytes:
        """The exact bytes POSTed (compact JSON, keys in the order written)."""
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False).encode()

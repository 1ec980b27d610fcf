"""Webhooks (docs/webhooks.md): where events may go, how long a receiver is waited for, how long
delivery is retried. Delays stay under visibility_timeout_s: a Redis-broker message waiting
longer would be delivered twice."""
from __future__ import annotations

from pydantic import Field

from poolq.jobs.settings.group import SettingsGroup


class WebhookSettings(SettingsGroup):
    """The allow-list of receivers, deadlines on them, retries, secret rotation, and delivery concurrency."""

    webhook_allow: str = Field("", description="comma-separated allow-list of webhook URL prefixes "
                               "(scheme://host[:port][/path], host may be *.domain or an IP literal; ' private' after "
                               "an entry also permits non-public addresses); empty: no webhooks")
    webhook_connect_timeout_s: float = Field(2.0, gt=0, le=30, description="connecting to a webhook receiver")
    webhook_read_timeout_s: float = Field(5.0, gt=0, le=60, description="waiting for a receiver's answer")
    webhook_max_response_bytes: int = Field(64 << 10, ge=0, description="most of a receiver's answer read")
    webhook_retry_base_s: float = Field(5.0, gt=0, description="first retry after this; doubles each time")
    webhook_retry_max_s: float = Field(900.0, gt=0, description="longest wait between two attempts")
    webhook_retry_for_s: float = Field(24 * 3600.0, ge=0, description="retries stop this long after the event")
    webhook_secret_overlap_s: float = Field(24 * 3600.0, ge=0, description="after `poolq webhooks secret "
                                            "--rotate`, events are signed with the old secret too for this long")
    # Deliveries run on a worker of their own (the webhooks queue); one tenant's receivers hold at most
    # webhook_tenant_concurrency of its threads at once (products/webhooks/tenant_turns.py).
    webhook_concurrency: int = Field(8, ge=1, description="threads of the webhook worker `poolq worker` starts "
                                     "(deliveries wait on receivers, not on the CPU)")
    webhook_tenant_concurrency: int = Field(2, ge=1, description="one tenant's deliveries in flight at once, over "
                                            "every webhook worker; more wait their turn")
    webhook_busy_retry_s: float = Field(1.0, gt=0, le=60, description="a delivery whose tenant has its "
                                        "deliveries in flight is sent again after about this long (jittered)")

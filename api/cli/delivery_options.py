"""The --reuse, --sink and --webhook (--webhook-running) options of ``poolq submit``: what a job may reuse,
and where its rows and its events go (``JobSpec.reuse``, ``.sink``, ``.webhook``).

``delivery_options`` adds the three options and hands the command one ``JobDelivery`` instead of three
more arguments; ``JobDelivery.add_to(spec)`` sets the fields that were given and no others, so the
server's defaults (``reuse: job``, no sink, no webhook) stay the server's.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import click

from poolq.jobs import ReuseMode


@dataclass(frozen=True)
class JobDelivery:
    reuse: str | None = None
    sink: str | None = None
    webhook: str | None = None
    webhook_running: bool = False  # also job.running, with the job's place, once it is planned

    def add_to(self, spec: dict) -> dict:
        """``spec`` with the given fields set (the server checks them: an unknown or ungranted sink, a
        webhook URL off the operator's allow-list, is a refusal naming the field)."""
        if self.reuse:
            spec["reuse"] = self.reuse
        if self.sink:
            spec["sink"] = self.sink
        if self.webhook:
            spec["webhook"] = {"url": self.webhook, **({"send_running": True} if self.webhook_running else {})}
        return spec


def delivery_options(command: Callable) -> Callable:
    """Add --reuse, --sink and --webhook to ``command`` and pass them as ``delivery=JobDelivery(...)``.
    Put it right above the ``def``."""

    @click.option("--reuse", type=click.Choice(get_args(ReuseMode)), default=None,
                  help="job (default): a text repeated in the job is computed once; tenant: also reuse what your "
                       "earlier jobs computed, and keep this job's outputs for later ones (docs/reuse.md)")
    @click.option("--sink", default=None, metavar="NAME",
                  help="load the rows into this sink once the job is done: one the operator configured and "
                       "granted you (docs/sinks/)")
    @click.option("--webhook", default=None, metavar="URL",
                  help="POST the job's signed end event here (docs/webhooks.md)")
    @click.option("--webhook-running", is_flag=True, default=False,
                  help="with --webhook: also POST job.running once the job is planned, with its place in the queue")
    @functools.wraps(command)
    def with_delivery(*args: object, reuse: str | None, sink: str | None, webhook: str | None, webhook_running: bool,
                      **kwargs: object) -> object:
        if webhook_running and not webhook:
            raise click.UsageError("--webhook-running needs --webhook URL: the address job.running is sent to")
        return command(*args, delivery=JobDelivery(reuse, sink, webhook, webhook_running), **kwargs)

    return with_delivery

"""`poolq webhooks secret`: a tenant's webhook signing secret, shown (made on first use) or rotated
(settings from POOLQ_* env, else the running local stack's: see ``local_stack.py``)."""
from __future__ import annotations

import json

import click

from poolq.api.cli.local_stack import cli_settings
from poolq.api.cli.output import reporting_store_errors


@click.group()
def webhooks() -> None:
    """Webhook signing secrets (docs/webhooks.md)."""


@webhooks.command()
@click.option("--tenant", required=True, help="the tenant whose jobs' events it signs")
@click.option("--rotate", is_flag=True, help="make a new secret; the old one also signs for "
              "POOLQ_WEBHOOK_SECRET_OVERLAP_S more seconds")
@click.option("--json", "as_json", is_flag=True, help="the secrets in effect and their times, as JSON")
def secret(tenant: str, rotate: bool, as_json: bool) -> None:
    """Print TENANT's webhook secret (whsec_...) on the last line, making it if it has none. Give
    it to the tenant: its receiver verifies every event's signature with it."""
    from poolq.jobs import InvalidTenant, validate_tenant
    from poolq.products import WebhookSecretStore

    try:
        validate_tenant(tenant)
    except InvalidTenant as exc:
        raise click.BadParameter(str(exc), param_hint="--tenant") from None
    settings = cli_settings()
    with reporting_store_errors(settings):
        store = WebhookSecretStore(settings.storage.object_store(), settings.storage.output_prefix)
        secrets = store.rotate(tenant, settings.webhooks.webhook_secret_overlap_s) if rotate else store.ensure(tenant)
    if as_json:
        click.echo(json.dumps(secrets.model_dump(mode="json"), indent=2))
        return
    if rotate and secrets.previous is not None:
        click.echo(f"rotated: the old secret also signs until {secrets.previous.retired_at:.0f} (unix time)", err=True)
    click.echo(f"webhook secret of tenant {tenant}:", err=True)
    click.echo(secrets.current.secret)

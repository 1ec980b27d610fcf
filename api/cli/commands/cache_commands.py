"""`poolq cache stats | clear --tenant T`: a tenant's stored outputs for reuse (docs/reuse.md), read
and deleted in the bucket directly, like `poolq keys` (settings from POOLQ_* env, else the running
local stack's: see ``local_stack.py``)."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

import click

from poolq.api.cli.local_stack import cli_settings
from poolq.api.cli.output import reporting_store_errors


@contextmanager
def _reuse_store(tenant: str) -> Iterator:
    from poolq.jobs import InvalidTenant, tenant_reuse_store

    settings = cli_settings()
    try:
        store = tenant_reuse_store(settings.storage.object_store(), settings.storage.output_prefix, tenant)
    except InvalidTenant as exc:
        raise click.BadParameter(str(exc), param_hint="--tenant") from None
    with reporting_store_errors(settings):
        yield store


@click.group()
def cache() -> None:
    """A tenant's stored outputs, which its jobs with reuse "tenant" copy instead of computing."""


@cache.command()
@click.option("--tenant", required=True, help="whose stored outputs")
@click.option("--json", "as_json", is_flag=True)
def stats(tenant: str, as_json: bool) -> None:
    """Objects, bytes and documents stored for TENANT (and under how many model/option scopes)."""
    with _reuse_store(tenant) as store:
        found = store.stats()
    if as_json:
        click.echo(json.dumps({"tenant": tenant, **found.to_json()}))
        return
    click.echo(f"tenant {tenant}: {found.documents} documents in {found.objects} objects, {found.bytes} bytes, "
               f"{found.scopes} model/option scopes")


@cache.command()
@click.option("--tenant", required=True, help="whose stored outputs")
@click.option("--yes", is_flag=True, help="do not ask")
def clear(tenant: str, yes: bool) -> None:
    """Delete everything stored for TENANT (its later jobs compute again; finished jobs keep their results)."""
    if not yes:
        click.confirm(f"delete every stored output of tenant {tenant}?", abort=True)
    with _reuse_store(tenant) as store:
        deleted = store.clear()
    click.echo(f"tenant {tenant}: {deleted} objects deleted")

"""`poolq keys create | list | revoke | resign`: API keys, per tenant (settings from POOLQ_* env, else the
running local stack's: see ``local_stack.py``)."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Iterator

import click

from poolq.api.cli.local_stack import cli_settings
from poolq.api.cli.output import reporting_store_errors


@contextmanager
def _keys() -> Iterator:
    """The key store, every store failure (and a missing signing secret) reported in one line."""
    from poolq.jobs import ApiKeyStore, SigningSecretMissing

    settings = cli_settings()
    with reporting_store_errors(settings):
        try:
            store = ApiKeyStore.from_settings(settings.storage.object_store(), settings, cache_s=0)
        except SigningSecretMissing as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        yield store


@click.group()
def keys() -> None:
    """Create, list and revoke API keys (stored hashed in the object store)."""


@keys.command()
@click.option("--tenant", required=True, help="the tenant the key acts for")
@click.option("--admin", is_flag=True, help="also allow schedules and operations")
@click.option("--name", default="", help="a note, e.g. who uses it")
def create(tenant: str, admin: bool, name: str) -> None:
    """Create a key; it is printed once, on the last line, and never stored in clear."""
    from poolq.jobs import InvalidTenant

    try:
        with _keys() as store:
            key, record = store.create(tenant, admin=admin, name=name)
    except InvalidTenant as exc:
        raise click.BadParameter(str(exc), param_hint="--tenant") from None
    click.echo(f"key {record.key_id} for tenant {tenant} ({', '.join(record.scopes)}); store it now, it is not shown again:",
               err=True)
    click.echo(key)


@keys.command(name="list")
@click.option("--json", "as_json", is_flag=True)
def list_keys(as_json: bool) -> None:
    """Key ids, tenants, scopes, creation and revocation times (never the keys)."""
    with _keys() as store:
        records, unsigned = store.list(), store.unsigned()
    if as_json:
        listed = [{k: v for k, v in vars(r).items() if k != "secret_sha256"} for r in records]
        click.echo(json.dumps(listed + [{"key_id": key_id, "rejected": "no valid signature"} for key_id in unsigned],
                              indent=2))
        return
    for r in records:
        state = f"revoked {r.revoked_at}" if r.revoked_at else "active"
        click.echo(f"{r.key_id}  {r.tenant:20} {','.join(r.scopes):12} {r.created_at}  {state}  {r.name}")
    for key_id in unsigned:
        click.echo(f"{key_id}  REJECTED: no valid signature (written without this POOLQ_KEY_SIGNING_SECRET; "
                   "`poolq keys resign` it only if you made it)")


@keys.command()
@click.argument("key_id")
def revoke(key_id: str) -> None:
    """Revoke KEY_ID (API processes notice within POOLQ_API_KEY_CACHE_S seconds)."""
    with _keys() as store:
        record = store.revoke(key_id)
    if record is None:
        click.echo(f"error: no key {key_id!r}", err=True)
        sys.exit(4)
    click.echo(f"revoked {key_id} (tenant {record.tenant})")


@keys.command()
@click.argument("key_ids", nargs=-1, required=True)
def resign(key_ids: tuple[str, ...]) -> None:
    """Sign the records of KEY_IDS with the current POOLQ_KEY_SIGNING_SECRET: keys made before
    records were signed, or under a secret being rotated out. It blesses whatever the record says:
    check each one (`poolq keys list`) first; a record you did not make is a forgery."""
    with _keys() as store:
        for key_id in key_ids:
            record = store.resign(key_id)
            if record is None:
                click.echo(f"error: no key record {key_id!r}", err=True)
                sys.exit(4)
            click.echo(f"signed {key_id} (tenant {record.tenant}, {','.join(record.scopes)}, created {record.created_at})")

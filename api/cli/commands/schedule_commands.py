"""``poolq schedules create | list | get | run | delete``: scheduled (incremental) reindex over HTTP.

Schedules need an admin key (403 otherwise, exit 5). Exit codes: see :class:`poolq.api.cli.output.ExitCode`.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from poolq.api.cli.output import api_time, print_json, with_client
from poolq.api.client.poolq_client import PoolqClient

if TYPE_CHECKING:
    from poolq.products import Schedule

_json_option = click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")


@click.group()
def schedules() -> None:
    """Reindex an input on a cron (UTC): one incremental job per cron time."""


@schedules.command()
@click.option("--cron", required=True, help='5-field cron, UTC, e.g. "0 3 * * *"')
@click.option("--input", "input_uri", required=True, help="s3://bucket/key.jsonl, or s3://bucket/prefix/")
@click.option("--id-field", default="id", show_default=True)
@click.option("--text-field", default="text", show_default=True)
@click.option("--template", default=None,
              help='the job\'s other fields as JSON, e.g. \'{"long_documents": {"mode": "truncate"}}\'')
@click.option("--disabled", is_flag=True, help="never fire on its own (run it with `poolq schedules run`)")
@_json_option
@with_client
def create(client: PoolqClient, cron: str, input_uri: str, id_field: str, text_field: str, template: str | None,
           disabled: bool, as_json: bool) -> None:
    """Create a schedule; prints its id."""
    body: dict = {"cron": cron, "input": {"uri": input_uri, "id_field": id_field, "text_field": text_field},
                  "enabled": not disabled}
    if template:
        try:
            body["template"] = json.loads(template)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--template") from None
    schedule = client.create_schedule(body)
    if as_json:
        print_json(schedule)
    else:
        click.echo(schedule.id)


@schedules.command(name="list")
@_json_option
@with_client
def list_(client: PoolqClient, as_json: bool) -> None:
    """List your schedules."""
    found = client.list_schedules()
    if as_json:
        print_json(found)
        return
    for schedule in found:
        click.echo(_line(schedule))


@schedules.command()
@click.argument("schedule_id")
@_json_option
@with_client
def get(client: PoolqClient, schedule_id: str, as_json: bool) -> None:
    """Show a schedule and its recent runs (newest first)."""
    schedule = client.get_schedule(schedule_id)
    if as_json:
        print_json(schedule)
        return
    click.echo(_line(schedule))
    for run in schedule.runs:
        how = "by hand" if run.manual else "on schedule"
        status = run.status.value if run.status else "-"
        click.echo(f"  {api_time(run.slot)}  job {run.job_id or '-'}  {status}  ({how})")


@schedules.command()
@click.argument("schedule_id")
@_json_option
@with_client
def run(client: PoolqClient, schedule_id: str, as_json: bool) -> None:
    """Run a schedule now (incrementally); prints the job id (`poolq wait ID` follows it)."""
    result = client.run_schedule(schedule_id)
    if as_json:
        print_json(result)
    else:
        click.echo(result.job_id or "")


@schedules.command()
@click.argument("schedule_id")
@with_client
def delete(client: PoolqClient, schedule_id: str) -> None:
    """Delete a schedule (the jobs it ran stay)."""
    client.delete_schedule(schedule_id)
    click.echo(f"deleted schedule {schedule_id}")


def _line(schedule: Schedule) -> str:
    state = "enabled" if schedule.enabled else "disabled"
    return f"{schedule.id}  {schedule.cron:<15}  {state:<8}  {schedule.input.uri}"

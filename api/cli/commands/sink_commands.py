"""``poolq sink retry JOB``: load a finished job's rows into its sink again (nothing is recomputed)."""
from __future__ import annotations

import click

from poolq.api.cli.output import print_json, with_client
from poolq.api.client.poolq_client import PoolqClient


@click.group()
def sink() -> None:
    """A job's sink load (docs/sinks/): retry it after a failure."""


@sink.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
@with_client
def retry(client: PoolqClient, job_id: str, as_json: bool) -> None:
    """Queue the failed sink load of finished job JOB_ID again; its parts are loaded, not recomputed."""
    answer = client.retry_sinks(job_id)
    if as_json:
        print_json(answer)
    else:
        click.echo(f"job {job_id}: loading into {', '.join(answer.retried)} again (poolq status {job_id} shows how it ends)")

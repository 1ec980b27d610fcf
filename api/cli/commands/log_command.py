"""``poolq logs JOB``: a job's story from the local stack's logs (submitted, planned, each shard
started and committed, finished), and every other line that names it."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from poolq.api.cli.local_stack import STACK_DIR_ENV, dev_state_dir


@click.command()
@click.argument("job_id")
@click.option("--dir", "state_dir", default=None, envvar=STACK_DIR_ENV, type=click.Path(file_okay=False, path_type=Path),
              help=f"the stack's state directory (env {STACK_DIR_ENV}; default: ./.poolq if there is one, else your "
                   "running stack, see `poolq --stack`)")
@click.option("--json", "as_json", is_flag=True, help="the log lines as written (JSON lines: pipe them to jq)")
@click.option("--all", "mentions", is_flag=True, help="also the lines that only mention the job (the API's access log)")
def logs(job_id: str, state_dir: Path | None, as_json: bool, mentions: bool) -> None:
    """Print JOB_ID's lines from the local stack's logs (API, workers), in time order.

    Elsewhere (a deployment's logs, POOLQ_LOG_FORMAT=json): jq -c 'select(.job_id == "JOB_ID")'."""
    from poolq.devtools.devstack.stack_logs import job_log_lines

    logs_dir = dev_state_dir(state_dir) / "logs"
    if not logs_dir.is_dir():
        click.echo(f"error: no logs under {logs_dir.resolve()} (is a stack there? `poolq dev status`)", err=True)
        sys.exit(2)
    lines = job_log_lines(logs_dir, job_id, mentions)
    if not lines:
        click.echo(f"error: no line of {logs_dir.resolve()}/*.log names job {job_id}", err=True)
        sys.exit(4)
    for line in lines:
        if as_json or line.entry is None:
            click.echo(line.text)
        else:
            entry = line.entry
            click.echo(f"{entry.get('ts', '')} {line.service:6} {entry.get('level', ''):7} {entry.get('message', '')}")

"""`poolq dev up | status | down`: the local stack, for development and the demo."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from poolq.api.cli.local_stack import DEFAULT_STACK_DIR, STACK_DIR_ENV, dev_state_dir

DEFAULT_DIR = DEFAULT_STACK_DIR
_up_dir_option = click.option(
    "--dir", "state_dir", default=DEFAULT_DIR, show_default=True, envvar=STACK_DIR_ENV,
    type=click.Path(file_okay=False, path_type=Path),
    help=f"where the stack keeps its state, data, logs and pids (env {STACK_DIR_ENV}); other commands find it from "
         "any directory (it is noted under $XDG_STATE_HOME/poolq while it runs)",
)
_dir_option = click.option(
    "--dir", "state_dir", default=None, envvar=STACK_DIR_ENV, type=click.Path(file_okay=False, path_type=Path),
    help=f"the stack's state directory (env {STACK_DIR_ENV}; default: ./.poolq if there is one, else your running "
         "stack, see `poolq --stack`)",
)
# A port taken by someone else is an error; 0 can never be taken (see devtools/devstack/stack.py).
ANY_PORT_HELP = "0: any free port (`poolq dev status --json` says which)"


@click.group()
def dev() -> None:
    """Manage a local stack: Redis, SeaweedFS (S3), the API and one worker."""


@dev.command()
@_up_dir_option
@click.option("--redis-port", default=6390, show_default=True, type=int, help=ANY_PORT_HELP)
@click.option("--s3-port", default=8333, show_default=True, type=int, help=ANY_PORT_HELP)
@click.option("--api-port", default=8000, show_default=True, type=int, help=ANY_PORT_HELP)
def up(state_dir: Path, redis_port: int, s3_port: int, api_port: int) -> None:
    """Start the stack (idempotent: running services are left as they are)."""
    from poolq.devtools.devstack.process import ServiceError
    from poolq.devtools.devstack.stack import LocalStack, StackPorts

    stack = LocalStack(state_dir, StackPorts(redis=redis_port, s3=s3_port, api=api_port))
    try:
        state, started = stack.up(log=click.echo)
    except ServiceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"stack {'started' if started else 'already running'}: API {state.api_url}, S3 {state.s3_endpoint} "
               f"(bucket {state.bucket}), Redis {state.redis_address}; details: poolq dev status --dir {state_dir} --json")


@dev.command()
@_dir_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable: endpoints, credentials, pids")
def status(state_dir: Path | None, as_json: bool) -> None:
    """Show the stack's endpoints, credentials and processes. Exit 1 if it is not running.

    The credentials come from the stack's state file, which only its owner can read (0600 in a
    0700 directory): for anyone else this command fails, and shows nothing."""
    from poolq.devtools.devstack.stack import LocalStack

    stack = LocalStack(dev_state_dir(state_dir))
    try:
        state = stack.load()
    except PermissionError:
        click.echo(f"error: cannot read {stack.state_path}: only the user who ran `poolq dev up` can", err=True)
        sys.exit(2)
    if state is None:
        click.echo(json.dumps({"running": False}) if as_json else f"no stack under {stack.state_dir}")
        sys.exit(1)
    alive = stack.running(state)
    if as_json:
        click.echo(json.dumps({"running": all(alive.values()), **asdict(state), "alive": alive}, indent=2))
    else:
        for name, is_alive in alive.items():
            click.echo(f"{name:8} {'running' if is_alive else 'stopped'}  pid {state.pids.get(name, '-')}")
        click.echo(f"API {state.api_url}  S3 {state.s3_endpoint} bucket {state.bucket}  Redis {state.redis_address}")
        if state.api_key:
            click.echo(f"API key (tenant dev, admin): {state.api_key}")
        click.echo(f"Flower login (poolq flower): {state.flower_basic_auth}")
        click.echo("S3 keys, the Redis password and the key-signing secret: --json")
    if not all(alive.values()):
        sys.exit(1)


@dev.command()
@_dir_option
def down(state_dir: Path | None) -> None:
    """Stop the processes `up` started (by pid); data stays in the directory."""
    from poolq.devtools.devstack.stack import LocalStack

    stopped = LocalStack(dev_state_dir(state_dir)).down()
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")

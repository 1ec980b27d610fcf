"""The CLI finds a local stack by itself: where `poolq dev up` runs one, commands use it, from any directory.

When nothing says otherwise (no ``--api-url`` / ``POOLQ_API_URL``, no ``POOLQ_STORE`` /
``POOLQ_S3_ENDPOINT_URL`` / ``POOLQ_BUCKET``; for `poolq flower`, no ``POOLQ_REDIS_URL``), client
verbs talk to the stack's API with its dev key, ``poolq keys`` to its SeaweedFS and `poolq flower`
to its Redis, with its Flower login. Explicit settings always win. Which stack, first match:

1. ``poolq --stack DIR`` / ``POOLQ_STACK``: that one (its state directory, or the folder holding
   its ``.poolq``); an error if it is not running;
2. ``POOLQ_DEV_DIR``: that state directory (none if it is not running);
3. ``./.poolq``, if it runs;
4. the user's running stacks (``$XDG_STATE_HOME/poolq/stacks``, noted by `poolq dev up`): the
   one there is; with several, the CLI names them and asks which (in a terminal), or says to
   choose with ``--stack``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from poolq.devtools.devstack.stack import LocalStack
    from poolq.devtools.devstack.stack_state import StackState
    from poolq.jobs import Settings

STACK_DIR_ENV = "POOLQ_DEV_DIR"
STACK_ENV = "POOLQ_STACK"
STACK_META = "poolq.stack"  # where `poolq --stack` leaves its value, in click's context
DEFAULT_STACK_DIR = Path(".poolq")
# Any of these set means the user chose a store: the local stack is not looked for.
STORE_SETTINGS = ("POOLQ_STORE", "POOLQ_S3_ENDPOINT_URL", "POOLQ_BUCKET")
BROKER_SETTINGS = ("POOLQ_REDIS_URL",)


def state_dir_of(path: Path) -> Path:
    """A stack's state directory, given it or the folder that holds it as ``.poolq``."""
    path = path.expanduser()
    if not (path / "stack.json").exists() and (path / DEFAULT_STACK_DIR / "stack.json").exists():
        return path / DEFAULT_STACK_DIR
    return path


def chosen_stack_dir() -> Path | None:
    """The state directory ``--stack`` / ``POOLQ_STACK`` names, if either does."""
    context = click.get_current_context(silent=True)
    value = (context.meta.get(STACK_META) if context else None) or os.environ.get(STACK_ENV)
    return state_dir_of(Path(value)) if value else None


def running_stack(service: str) -> "StackState | None":
    """The state of the stack the CLI uses (see the module's doc) if its ``service`` (api, seaweed,
    redis, ...) is alive; click.UsageError if ``--stack`` names one that is not running, or if
    several run and none is chosen."""
    from poolq.devtools.devstack.stack import LocalStack
    from poolq.devtools.devstack.stack_finder import running_stacks

    chosen = chosen_stack_dir()
    if chosen is not None:
        state = _alive(LocalStack(chosen), service)
        if state is None:
            raise click.UsageError(f"no running stack at {chosen} ({service} is not running there; --stack / {STACK_ENV})")
        return state
    if os.environ.get(STACK_DIR_ENV):
        return _alive(LocalStack(Path(os.environ[STACK_DIR_ENV])), service)
    here = _alive(LocalStack(DEFAULT_STACK_DIR), service)
    if here is not None:
        return here
    found = [(stack, state) for stack, state in running_stacks() if stack.running(state).get(service)]
    return _pick(found)[1] if found else None


def dev_state_dir(given: Path | None) -> Path:
    """The stack `poolq dev status | down` look at: ``--dir`` (or ``POOLQ_DEV_DIR``), ``--stack``,
    ``./.poolq`` if it has one, else the user's running stack; ``./.poolq`` when there is none."""
    from poolq.devtools.devstack.stack_finder import running_stacks

    if given is not None:
        return given
    chosen = chosen_stack_dir()
    if chosen is not None:
        return chosen
    if (DEFAULT_STACK_DIR / "stack.json").exists():
        return DEFAULT_STACK_DIR
    found = running_stacks()
    return _pick(found)[0].state_dir if found else DEFAULT_STACK_DIR


def _alive(stack: "LocalStack", service: str) -> "StackState | None":
    try:
        state = stack.load()
    except (OSError, ValueError):
        return None
    if state is None or not stack.running(state).get(service):
        return None
    return state


def _pick(found: list[tuple["LocalStack", "StackState"]]) -> tuple["LocalStack", "StackState"]:
    """The one stack of ``found``; of several, the one the user picks in a terminal, else an error naming them."""
    if len(found) == 1:
        return found[0]
    listing = "\n".join(f"  {number}. {stack.state_dir}  (API {state.api_url})"
                        for number, (stack, state) in enumerate(found, start=1))
    if sys.stdin.isatty() and sys.stderr.isatty():
        click.echo(f"{len(found)} local stacks are running:\n{listing}", err=True)
        number = click.prompt("which one", type=click.IntRange(1, len(found)), err=True)
        return found[number - 1]
    raise click.UsageError(f"{len(found)} local stacks are running; choose one with --stack DIR (or {STACK_ENV}=DIR):\n"
                           f"{listing}")


def cli_settings(chosen_by: tuple[str, ...] = STORE_SETTINGS, service: str = "seaweed") -> "Settings":
    """Settings from the environment; where it sets none of ``chosen_by`` (the settings that name a
    store, by default), those of the local stack whose ``service`` runs (its variables the environment lacks)."""
    from poolq.jobs import Settings

    if any(os.environ.get(name) for name in chosen_by):
        return Settings()
    state = running_stack(service)
    if state is None:
        return Settings()
    # The stack's POOLQ_* variables as the environment would give them: strings, which Settings parses.
    overrides: dict[str, Any] = {name[len("POOLQ_"):].lower(): value for name, value in state.cli_env().items()
                                 if name.startswith("POOLQ_") and name not in os.environ}
    return Settings(**overrides)


def describe_store(settings: "Settings") -> str:
    if settings.store == "local":
        return f"the local store at {settings.local_store_root}"
    endpoint = settings.s3_endpoint_url or "AWS S3 (no POOLQ_S3_ENDPOINT_URL)"
    return f"bucket {settings.bucket!r} at {endpoint}"

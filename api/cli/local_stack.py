"""The CLI finds a local stack by itself: where `poolq dev up` runs one, commands use it, from any directory.

When nothing says otherwise (no ``--api-url`` / ``POOLQ_API_URL`` for the API verbs, no
``POOLQ_STORE`` / ``POOLQ_S3_ENDPOINT_URL`` / ``POOLQ_BUCKET`` for the store's, no
``POOLQ_REDIS_URL`` for `poolq flower`), client verbs talk to the stack's API with its dev key,
``poolq keys`` / ``webhooks`` / ``cache`` to its SeaweedFS and `poolq flower` to its Redis, with its
Flower login. Explicit settings always win. Which stack, first match (``stack_choice.py`` says
how each rule matches):

1. ``POOLQ_API_URL``, where a running stack serves that API: that one (so a shell set up for one
   stack's API gets that stack's store, broker and logs too);
2. ``poolq --stack DIR`` / ``POOLQ_STACK``: that one (its state directory, the folder holding
   its ``.poolq``, or a running stack's name); an error if it is not running;
3. ``POOLQ_DEV_DIR``: that state directory (none if it is not running);
4. the running stack whose folder is the current directory or holds it (the closest);
5. the user's running stacks (``$XDG_STATE_HOME/poolq/stacks``, noted by `poolq dev up`): the
   one there is; with several, the CLI names them and asks which (in a terminal), or exits 2
   saying how to choose.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from poolq.api.cli.stack_choice import DEFAULT_STACK_DIR, STACK_ENV, known_stacks, loaded, named, nearest, pick, serving

if TYPE_CHECKING:
    from poolq.devtools.devstack.stack import LocalStack
    from poolq.devtools.devstack.stack_state import StackState
    from poolq.jobs import Settings

STACK_DIR_ENV = "POOLQ_DEV_DIR"
STACK_META = "poolq.stack"  # where `poolq --stack` leaves its value, in click's context
# Any of these set means the user chose a store: the local stack is not looked for.
STORE_SETTINGS = ("POOLQ_STORE", "POOLQ_S3_ENDPOINT_URL", "POOLQ_BUCKET")
BROKER_SETTINGS = ("POOLQ_REDIS_URL",)


def state_dir_of(path: Path) -> Path:
    """A stack's state directory, given it or the folder that holds it as ``.poolq``."""
    path = path.expanduser()
    if not (path / "stack.json").exists() and (path / DEFAULT_STACK_DIR / "stack.json").exists():
        return path / DEFAULT_STACK_DIR
    return path


def chosen_stack_dir(known: list[tuple["LocalStack", "StackState"]]) -> Path | None:
    """The state directory ``--stack`` / ``POOLQ_STACK`` names, if either does: a path holding a
    stack, else the one of the ``known`` running stacks of that name (which of several is asked),
    else the path as given (the caller says nothing runs there)."""
    context = click.get_current_context(silent=True)
    value = (context.meta.get(STACK_META) if context else None) or os.environ.get(STACK_ENV)
    if not value:
        return None
    path = state_dir_of(Path(value))
    if (path / "stack.json").exists():
        return path
    of_that_name = named(value, known)
    return pick(of_that_name)[0].state_dir if of_that_name else path


def running_stack(service: str) -> "StackState | None":
    """The state of the stack the CLI uses (see the module's doc) if its ``service`` (api, seaweed,
    redis, ...) is alive; click.UsageError if ``POOLQ_API_URL`` or ``--stack`` names one whose
    ``service`` is not running, or if several run and none is chosen."""
    from poolq.devtools.devstack.stack import LocalStack

    known = known_stacks()
    at_url = serving(_api_url(), known)
    if at_url is not None:
        return _require(at_url[0], service, f"POOLQ_API_URL is its API, {at_url[1].api_url}")
    chosen = chosen_stack_dir(known)
    if chosen is not None:
        return _require(LocalStack(chosen), service, f"--stack / {STACK_ENV}")
    if os.environ.get(STACK_DIR_ENV):
        return _alive(LocalStack(Path(os.environ[STACK_DIR_ENV])), service)
    serving_it = [(stack, state) for stack, state in known if stack.running(state).get(service)]
    found = nearest(serving_it) or serving_it
    return pick(found)[1] if found else None


def dev_state_dir(given: Path | None) -> Path:
    """The stack `poolq dev status | down` and `poolq logs` look at: ``--dir`` (or ``POOLQ_DEV_DIR``),
    the one serving ``POOLQ_API_URL``, ``--stack``, ``./.poolq`` if it has one (running or not),
    the running one whose folder holds the current directory, else the user's running stack;
    ``./.poolq`` when there is none."""
    if given is not None:
        return given
    known = known_stacks()
    at_url = serving(_api_url(), known)
    if at_url is not None:
        return at_url[0].state_dir
    chosen = chosen_stack_dir(known)
    if chosen is not None:
        return chosen
    if (DEFAULT_STACK_DIR / "stack.json").exists():
        return DEFAULT_STACK_DIR
    found = nearest(known) or known
    return pick(found)[0].state_dir if found else DEFAULT_STACK_DIR


def _api_url() -> str | None:
    # Imported here: the client's module loads httpx, which `poolq --help` does without.
    from poolq.api.client.poolq_client import API_URL_ENV

    return os.environ.get(API_URL_ENV)


def _require(stack: "LocalStack", service: str, chosen_by: str) -> "StackState":
    state = _alive(stack, service)
    if state is None:
        raise click.UsageError(f"no running stack at {stack.state_dir} ({service} is not running there; {chosen_by})")
    return state


def _alive(stack: "LocalStack", service: str) -> "StackState | None":
    state = loaded(stack)
    if state is None or not stack.running(state).get(service):
        return None
    return state


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
    if settings.storage.store == "local":
        return f"the local store at {settings.storage.local_store_root}"
    endpoint = settings.storage.s3_endpoint_url or "AWS S3 (no POOLQ_S3_ENDPOINT_URL)"
    return f"bucket {settings.storage.bucket!r} at {endpoint}"

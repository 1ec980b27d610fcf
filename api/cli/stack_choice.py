"""Which of several running local stacks the CLI means: the one serving ``POOLQ_API_URL``, the one
``POOLQ_STACK`` names (a path, or a stack's name), the one whose folder holds the current
directory; else the user picks (in a terminal) or is told how to (``local_stack.py`` orders these rules).

A stack's *folder* is the directory that holds its state directory when that is a ``.poolq…``
folder (``.poolq`` of `poolq dev up`, ``.poolq-demo`` of `poolq demo`): the project it was started
in. A state directory named otherwise (``--dir /tmp/stack-a``) is its own folder: a stack under
``/tmp`` does not claim every directory below ``/tmp``. A stack's *names* are its folder's name and
its state directory's name (``POOLQ_STACK=myproject`` or ``POOLQ_STACK=.poolq-demo``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from poolq.devtools.devstack.stack import LocalStack
    from poolq.devtools.devstack.stack_state import StackState

    Found = tuple[LocalStack, StackState]

STACK_ENV = "POOLQ_STACK"
DEFAULT_STACK_DIR = Path(".poolq")
_STATE_DIR_PREFIX = ".poolq"  # a state directory named so lives in the project it serves


def known_stacks() -> list["Found"]:
    """The running stacks the CLI can see: those noted in the user's record (``stack_registry.py``),
    and a ``.poolq`` of the current directory or one above it (one started with another
    ``XDG_STATE_HOME`` is noted elsewhere), each once."""
    from poolq.devtools.devstack.stack import LocalStack
    from poolq.devtools.devstack.stack_finder import running_stacks

    found = running_stacks()
    seen = {stack.state_dir for stack, _ in found}
    for folder in _here_and_above():
        state_dir = folder / DEFAULT_STACK_DIR
        if state_dir in seen or not (state_dir / "stack.json").is_file():
            continue
        stack = LocalStack(state_dir)
        state = loaded(stack)
        if state is not None and any(stack.running(state).values()):
            found.append((stack, state))
    return found


def loaded(stack: "LocalStack") -> "StackState | None":
    """The stack's state, None where it has none or it cannot be read now (a half-written file)."""
    try:
        return stack.load()
    except (OSError, ValueError):
        return None


def stack_folder(state_dir: Path) -> Path:
    return state_dir.parent if state_dir.name.startswith(_STATE_DIR_PREFIX) else state_dir


def serving(api_url: str | None, stacks: list["Found"]) -> "Found | None":
    """The stack of ``stacks`` whose API is at ``api_url`` (a trailing ``/`` aside), if one is."""
    if not api_url:
        return None
    wanted = api_url.rstrip("/")
    return next(((stack, state) for stack, state in stacks if state.api_url.rstrip("/") == wanted), None)


def named(name: str, stacks: list["Found"]) -> list["Found"]:
    """The stacks of ``stacks`` one of whose names (see the module's doc) is ``name``."""
    return [(stack, state) for stack, state in stacks
            if name in (stack.state_dir.name, stack_folder(stack.state_dir).name)]


def nearest(stacks: list["Found"]) -> list["Found"]:
    """The stacks whose folder is the current directory or the closest one above it; of two there,
    the ``.poolq`` one (`poolq dev up`'s, as ``./.poolq`` always was). Empty where no folder holds it."""
    around = _here_and_above()
    holding = [(len(stack_folder(stack.state_dir).parts), stack, state) for stack, state in stacks
               if stack_folder(stack.state_dir) in around]
    if not holding:
        return []
    depth = max(found[0] for found in holding)
    closest = [(stack, state) for level, stack, state in holding if level == depth]
    default = [(stack, state) for stack, state in closest if stack.state_dir.name == DEFAULT_STACK_DIR.name]
    return default if len(default) == 1 else closest


def _here_and_above() -> tuple[Path, ...]:
    """The current directory and those above it; none where it was removed (a shell left in a deleted folder)."""
    try:
        here = Path.cwd().resolve()
    except FileNotFoundError:
        return ()
    return (here, *here.parents)


def pick(found: list["Found"]) -> "Found":
    """The one stack of ``found``; of several, the one the user picks in a terminal, else a usage
    error (exit 2, on stderr) naming them and the ways to choose."""
    if len(found) == 1:
        return found[0]
    listing = "\n".join(f"  {number}. {stack.state_dir}  (API {state.api_url})"
                        for number, (stack, state) in enumerate(found, start=1))
    if sys.stdin.isatty() and sys.stderr.isatty():
        click.echo(f"{len(found)} local stacks are running:\n{listing}", err=True)
        number = click.prompt("which one", type=click.IntRange(1, len(found)), err=True)
        return found[number - 1]
    context = click.get_current_context(silent=True)
    command = context.command_path if context else "poolq"
    raise click.UsageError(
        f"{len(found)} local stacks are running; choose one with {STACK_ENV}=DIR (or --stack DIR), DIR being its state "
        f"directory, the folder holding it, or that folder's name; or run the command from inside its folder; or set "
        f"POOLQ_API_URL to its API:\n{listing}\n"
        f"for example: {STACK_ENV}={found[0][0].state_dir} {command} ...")

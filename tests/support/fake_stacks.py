"""Stand-in local stacks: a state file whose pids are real processes carrying every service's
command-line marker (``CMDLINE_MARKERS``: "redis-server", "weed", "serve", ...), so `LocalStack.running`
sees them alive; no service listens. Noted in a registry as `poolq dev up` would note them."""
from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Callable, Iterator

from poolq.devtools.devstack.stack import SERVICES, LocalStack
from poolq.devtools.devstack.stack_registry import StackRegistry
from poolq.devtools.devstack.stack_state import StackState


@contextmanager
def stand_in_processes() -> Iterator[Callable[[], int]]:
    """Yields a function starting one sleeping process with every marker and returning its pid; all are killed after."""
    procs: list[subprocess.Popen] = []

    def start() -> int:
        argv = [sys.executable, "-c", "import time; time.sleep(120)", "redis-server weed serve worker beat"]
        procs.append(subprocess.Popen(argv))
        return procs[-1].pid

    try:
        yield start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def fake_stack(state_dir: Path, api_url: str, pid: int | None, registry: StackRegistry, **values: str) -> LocalStack:
    """A stack at ``state_dir`` whose services all have ``pid`` (none: stopped), noted in ``registry``;
    ``values`` set StackState fields (``s3_endpoint``, ``bucket``, ...), the others are placeholders."""
    placeholders = {field.name: f"x-{field.name}" for field in fields(StackState)}
    pids = {name: pid for name in SERVICES} if pid else {}
    state = StackState(**{**placeholders, "state_dir": str(state_dir), "api_url": api_url, "ports": {}, "pids": pids,
                          **values})
    stack = LocalStack(state_dir, registry=registry)
    state.save(stack.state_path)
    registry.add(stack.state_dir)
    return stack

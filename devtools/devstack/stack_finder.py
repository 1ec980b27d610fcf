"""The user's running local stacks, from the registry's notes (``stack_registry.py``)."""
from __future__ import annotations

from poolq.devtools.devstack.stack import LocalStack
from poolq.devtools.devstack.stack_registry import StackRegistry
from poolq.devtools.devstack.stack_state import StackState


def running_stacks(registry: StackRegistry | None = None) -> list[tuple[LocalStack, StackState]]:
    """The noted stacks with a service alive, oldest note first. Notes of stacks that are gone
    (directory removed, every process ended without `down`) are dropped on the way."""
    registry = registry or StackRegistry()
    found = []
    for state_dir in registry.state_dirs():
        stack = LocalStack(state_dir, registry=registry)
        try:
            state = stack.load()
        except (OSError, ValueError):
            continue  # unreadable now (a half-written file, permissions changed): left for the next look
        if state is None or not any(stack.running(state).values()):
            registry.remove(state_dir)
            continue
        found.append((stack, state))
    return found

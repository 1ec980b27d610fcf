"""The CLI finds a local stack by itself: where `poolq dev up` runs one, commands use it.

When nothing says otherwise (no ``--api-url`` / ``POOLQ_API_URL``, no ``POOLQ_STORE`` /
``POOLQ_S3_ENDPOINT_URL`` / ``POOLQ_BUCKET``), client verbs talk to the stack's API with its
dev key, and ``poolq keys`` to its SeaweedFS. Explicit settings always win. The stack's state
directory is ``./.poolq`` or ``POOLQ_DEV_DIR``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from poolq.devtools.devstack.stack_state import StackState
    from poolq.jobs import Settings

STACK_DIR_ENV = "POOLQ_DEV_DIR"
DEFAULT_STACK_DIR = Path(".poolq")
# Any of these set means the user chose a store: the local stack is not looked for.
STORE_SETTINGS = ("POOLQ_STORE", "POOLQ_S3_ENDPOINT_URL", "POOLQ_BUCKET")


def stack_dir() -> Path:
    return Path(os.environ.get(STACK_DIR_ENV) or DEFAULT_STACK_DIR)


def running_stack(service: str) -> "StackState | None":
    """The local stack's state if it has one whose ``service`` (api, seaweed, ...) is alive."""
    from poolq.devtools.devstack.stack import LocalStack

    stack = LocalStack(stack_dir())
    try:
        state = stack.load()
    except (OSError, ValueError):
        return None
    if state is None or not stack.running(state).get(service):
        return None
    return state


def cli_settings() -> "Settings":
    """Settings from the environment; where it names no store, the running local stack's."""
    from poolq.jobs import Settings

    if any(os.environ.get(name) for name in STORE_SETTINGS):
        return Settings()
    state = running_stack("seaweed")
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


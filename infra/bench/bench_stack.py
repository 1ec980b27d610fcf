"""What the live-stack benchmarks (``eta_accuracy.py``, ``live_queue.py``) share: a fresh local stack
for the run, and an API key of a second tenant on it."""
from __future__ import annotations

import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from poolq.devtools.devstack.ports import ANY_PORT
from poolq.devtools.devstack.stack import LocalStack, StackPorts
from poolq.jobs import ApiKeyStore, Settings
from poolq.storage import S3Config, S3ObjectStore, make_s3_client

OTHER_TENANT = "bench-other"


@contextmanager
def bench_stack(state_dir: Path | None, prefix: str) -> Iterator:
    """A local stack on free ports in ``state_dir`` (default: a new temporary directory named
    ``prefix``…), its log on stderr; yields its state, then stops what it started."""
    root = state_dir or Path(tempfile.mkdtemp(prefix=prefix))
    stack = LocalStack(root, StackPorts(redis=ANY_PORT, s3=ANY_PORT, api=ANY_PORT))
    state, started = stack.up(log=lambda line: print(line, file=sys.stderr))
    try:
        yield state
    finally:
        stack.down(only=started)


def other_tenant_key(state, tenant: str = OTHER_TENANT) -> str:
    """A new API key of ``tenant`` on the stack ``state`` describes (the stack's own key is tenant dev's)."""
    config = S3Config(state.s3_endpoint, state.access_key_id, state.secret_access_key)
    store = S3ObjectStore(make_s3_client(config), state.bucket, config)
    key, _ = ApiKeyStore(store, Settings.flat_fields()["output_prefix"].default,
                         signing_secret=state.key_signing_secret).create(tenant)
    return key

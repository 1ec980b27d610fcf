"""`poolq demo`, the README's first command, run for real on free ports (port 0: any)."""
import os
import re
import subprocess
import sys

import pytest

from poolq.devtools.devstack.process import pid_alive
from poolq.devtools.devstack.stack_state import StackState

pytestmark = pytest.mark.integration


def test_demo_runs_the_sample_job_and_stops_its_stack(tmp_path):
    state_dir = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "poolq.api", "demo", "--dir", str(state_dir),
         "--redis-port", "0", "--s3-port", "0", "--api-port", "0"],  # any free ports, no race for them
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "80"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # No secret reaches the terminal (`poolq dev status` shows them to the stack's owner)
    state = StackState.load(state_dir / "stack.json")
    assert state is not None and state.api_key and "poolq dev status" in out
    assert not [secret for secret in (state.api_key, state.secret_access_key, state.redis_password,
                                      state.key_signing_secret, state.flower_password) if secret in out]
    assert "job succeeded" in out and "'completed': 37" in out
    # Every document is in exactly one of the parts it lists (shards of ~10 s of work: several parts)
    rows = [int(n) for n in re.findall(r"parts/part-\d{5}\.[0-9a-f]{16}\.parquet  \((\d+) rows\)", out)]
    assert rows and sum(rows) == 37 and "results in bucket poolq" in out, out
    assert "nearest neighbour of State of the Union" in out
    assert re.search(r"manifest  \S+/manifest\.json\n", out), out
    assert "every document embedded whole" in out and "none truncated" in out
    # Then everything it started is stopped
    state = StackState.load(state_dir / "stack.json")
    assert state is not None and state.pids == {}
    for name in ("beat", "worker", "api", "seaweed", "redis"):
        assert f"stopped {name}" in out
    started_pids = [int(pid) for pid in re.findall(r"started \(pid (\d+)\)", out)]
    assert len(started_pids) == 5 and not any(pid_alive(pid) for pid in started_pids)

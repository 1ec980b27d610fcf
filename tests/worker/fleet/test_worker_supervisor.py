"""WorkerSupervisor on real child processes (small Python scripts standing in for workers)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from poolq.worker.fleet.worker_supervisor import RestartPolicy, WorkerCommand, WorkerSupervisor

FAST = RestartPolicy(max_restarts=2, window_s=60, first_backoff_s=0.05, max_backoff_s=0.2, poll_s=0.02)
DIES_ONCE = ("import os, sys\n"
             "marker = sys.argv[1]\n"
             "if not os.path.exists(marker):\n"
             "    open(marker, 'w').close()\n"
             "    os._exit(9)  # as if killed\n")
# Exits 0 on SIGTERM, like Celery's warm shutdown; creates the file argv[1] once it would.
WAITS_FOR_SIGTERM = ("import signal, sys, time\n"
                     "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
                     "open(sys.argv[1], 'w').close()\n"
                     "time.sleep(60)\n")
# Runs the crash once the file argv[1] exists (the healthy worker beside it is ready by then).
AFTER_READY = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\n"


def _when_ready(paths, then) -> None:
    """Call ``then`` from a thread once every file in ``paths`` exists."""
    def wait() -> None:
        while not all(path.exists() for path in paths):
            time.sleep(0.01)
        then()
    threading.Thread(target=wait, daemon=True).start()


def _command(name: str, script: str, *args: str) -> WorkerCommand:
    return WorkerCommand(name, [sys.executable, "-c", script, *args], dict(os.environ))


class RecordingPopen:
    def __init__(self) -> None:
        self.started: list[str] = []

    def __call__(self, argv, env):
        self.started.append(argv[2])
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)


def test_a_worker_that_dies_is_started_again_and_a_clean_exit_ends_it(tmp_path):
    # Given one worker that dies on its first start and exits 0 on its second
    popen = RecordingPopen()
    supervisor = WorkerSupervisor([_command("gpu0", DIES_ONCE, str(tmp_path / "died"))], FAST, popen=popen)
    # When it is supervised
    code = supervisor.run()
    # Then it was started twice, and its clean exit was not restarted
    assert popen.started == [DIES_ONCE, DIES_ONCE]
    assert code == 0


@pytest.mark.parametrize("crash, code", [("import sys; sys.exit(3)", 3),
                                         ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9)],
                         ids=["exit-3", "sigkill"])
def test_a_crash_loop_stops_the_other_workers_and_exits_with_its_code(tmp_path, crash, code):
    # Given a worker that always fails beside a healthy one
    popen = RecordingPopen()
    ready = tmp_path / "gpu1-ready"
    crashing = _command("gpu0", AFTER_READY + crash, str(ready))
    healthy = _command("gpu1", WAITS_FOR_SIGTERM, str(ready))
    supervisor = WorkerSupervisor([crashing, healthy], FAST, popen=popen)
    # When it is supervised
    start = time.monotonic()
    exit_code = supervisor.run()
    # Then the failing one was restarted max_restarts times, then everything stopped with its code
    assert popen.started.count(crashing.argv[2]) == FAST.max_restarts + 1
    assert popen.started.count(healthy.argv[2]) == 1
    assert exit_code == code
    assert time.monotonic() - start < 30  # the healthy one was told to stop, not waited out


def test_sigterm_is_passed_on_and_nothing_is_restarted_afterwards(tmp_path):
    # Given two running workers that exit 0 on SIGTERM
    popen = RecordingPopen()
    ready = [tmp_path / "gpu0-ready", tmp_path / "gpu1-ready"]
    supervisor = WorkerSupervisor([_command(f"gpu{i}", WAITS_FOR_SIGTERM, str(ready[i])) for i in (0, 1)], FAST,
                                  popen=popen)
    # When the supervisor is told to stop while they run
    _when_ready(ready, lambda: supervisor.stop(signal.SIGTERM))
    code = supervisor.run()
    # Then both got the signal and exited cleanly, and neither was started again
    assert code == 0
    assert len(popen.started) == 2

"""Keeps a fixed set of worker processes running: the per-GPU workers of ``poolq worker --gpus``.

A worker that dies on its own (killed for memory, a driver fault, Celery stopping on an
unrecoverable error) is started again after a back-off, so its GPU does not sit idle until
every other worker has ended. One that keeps dying is a crash loop, not bad luck: after
``max_restarts`` failures within ``window_s`` the supervisor stops the others and exits with
the failing worker's code, for the service manager above it to see. A worker that exits 0 by
itself was stopped on purpose (Celery's warm shutdown) and stays stopped.

SIGTERM/SIGINT are passed on to every running worker (each finishes its shard); pending
restarts are cancelled, and the supervisor returns once all have exited.
"""
from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class WorkerCommand:
    name: str  # for the log: "gpu0"
    argv: list[str]
    env: dict[str, str]  # the whole environment of the process


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5  # failures of one worker within window_s that are still restarted
    window_s: float = 300.0
    first_backoff_s: float = 1.0  # doubled after each failure in the window, up to max_backoff_s
    max_backoff_s: float = 60.0
    poll_s: float = 0.5


@dataclass
class _Slot:
    """One worker: its command, its current process, and its recent failures."""

    command: WorkerCommand
    process: subprocess.Popen | None = None
    restart_at: float | None = None
    failures: list[float] = field(default_factory=list)
    exit_code: int | None = None  # set once it has ended for good


class WorkerSupervisor:
    def __init__(self, commands: Sequence[WorkerCommand], policy: RestartPolicy = RestartPolicy(),
                 popen: Callable[..., subprocess.Popen] = subprocess.Popen,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._popen, self._clock = popen, clock
        self._slots = [_Slot(command) for command in commands]
        self._stopping = False

    def run(self) -> int:
        """Start every worker and supervise them until all have ended; returns the exit code."""
        for slot in self._slots:
            self._start(slot)
        while not all(slot.exit_code is not None for slot in self._slots):
            for slot in self._slots:
                self._check(slot)
            time.sleep(self.policy.poll_s)
        return max((slot.exit_code or 0 for slot in self._slots), default=0)

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Pass ``signum`` to every running worker; nothing is restarted from now on."""
        self._stopping = True
        for slot in self._slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.send_signal(signum)
            elif slot.exit_code is None and slot.process is None:
                slot.exit_code = 0  # was waiting for a restart: stays stopped

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, lambda signum, _frame: self.stop(signum))
        signal.signal(signal.SIGINT, lambda signum, _frame: self.stop(signum))

    def _start(self, slot: _Slot) -> None:
        slot.process, slot.restart_at = self._popen(slot.command.argv, env=slot.command.env), None

    def _check(self, slot: _Slot) -> None:
        if slot.exit_code is not None:
            return
        if slot.process is None:
            if slot.restart_at is not None and self._clock() >= slot.restart_at and not self._stopping:
                self._start(slot)
            return
        returncode = slot.process.poll()
        if returncode is None:
            return
        # Killed by a signal: Popen says -N, a shell and service managers 128 + N.
        code = returncode if returncode >= 0 else 128 - returncode
        slot.process = None
        if self._stopping or code == 0:
            slot.exit_code = code
            return
        self._failed(slot, code)

    def _failed(self, slot: _Slot, code: int) -> None:
        now = self._clock()
        slot.failures = [at for at in slot.failures if now - at < self.policy.window_s] + [now]
        name = slot.command.name
        if len(slot.failures) > self.policy.max_restarts:
            log.error("worker %s exited with %s, %d times in %.0f s: a crash loop; stopping the others",
                      name, code, len(slot.failures), self.policy.window_s)
            slot.exit_code = code
            self.stop()
            return
        backoff = min(self.policy.first_backoff_s * 2 ** (len(slot.failures) - 1), self.policy.max_backoff_s)
        log.warning("worker %s exited with %s; restarting it in %.0f s", name, code, backoff)
        slot.restart_at = now + backoff

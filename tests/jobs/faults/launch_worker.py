"""Test-only worker launcher: install fault patches, then run a poolq worker in this process.

Run as ``python tests/jobs/faults/launch_worker.py``; settings come from POOLQ_* as for
``poolq worker``, faults from these variables (all optional):

``POOLQ_FAULT_LOG_DIR``            where the patches record what happened (JSON lines, see ``_record``)
``POOLQ_FAULT_HOSTNAME``           the Celery node name
``POOLQ_FAULT_SLOW_S``             sleep this long after each document the model returns
``POOLQ_FAULT_POISON_MARKER``      a model run over a text containing it kills its process (``os._exit(1)``)
``POOLQ_FAULT_EXIT_AFTER_COMMIT``  a marker file: the first won commit of the deployment (the file
                                   did not exist yet) exits the process right after the commit marker
                                   is written, before anything is counted or acked
``POOLQ_FAULT_S3_503``             the first N PutObject calls whose key contains
                                   ``POOLQ_FAULT_S3_KEY_SUBSTRING`` get a 503 SlowDown (N across all
                                   processes sharing the log dir)
``POOLQ_FAULT_S3_FAIL_KEY_SUBSTRING``  every PutObject whose key contains it gets a 503 SlowDown
``POOLQ_FAULT_S3_503_AFTER_WRITE`` the first PutObject whose key contains it is written, then
                                   answered 503 SlowDown (the caller cannot tell it landed)
``POOLQ_FAULT_BROKER_VISIBILITY_S``  the broker's visibility timeout in this worker, whatever the
                                   settings say (a task that outlives it is delivered again)
``POOLQ_FAULT_RESTORE_INTERVAL_S`` how often kombu puts unacked messages whose visibility timeout
                                   passed back on their queue (kombu's default is ~100 s)

Every delivery of a shard task is recorded too (``deliveries``, ``delivery_results``), and every
model run (``model_runs``: the documents it embedded; ``lane_runs``: the interactive lane's
requests, slowed down alike), so tests can count work per document.

Every patch is installed before Celery forks its pool, so pool children inherit them. The
heavy model-code imports happen here too, once, so a new pool child loads the model in about
a second (a test speed-up only: the worker's behaviour is unchanged).

``launch_worker.py --fork-server ORDERS_DIR``: do the imports once, then fork one worker per order
(``<n>.json`` in ORDERS_DIR: the worker's environment and log file). Each test process runs one
such server, so starting a worker costs a fork, not ~3 CPU-s of importing torch and transformers
again (the suite starts ~60 workers). The server writes ``<n>.pid`` as it forks and ``<n>.exit``
(the exit code) when it reaps the worker. A worker leads its own session and kills its process
group if the server dies, and the server exits when the test process that started it dies.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_ROOT))

_ENV = os.environ


def _record(kind: str, **fields) -> None:
    """Append one event to ``<log dir>/<kind>.jsonl`` (one write per line: safe across processes)."""
    log_dir = _ENV.get("POOLQ_FAULT_LOG_DIR")
    if not log_dir:
        return
    line = json.dumps({"pid": os.getpid(), "t": time.time(), **fields}) + "\n"
    fd = os.open(os.path.join(log_dir, f"{kind}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _claim(path: str) -> bool:
    """True for the one caller (in any process) that creates ``path``."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def _claim_one_of(prefix: str, count: int) -> bool:
    """True for the first ``count`` callers (across processes) asking with this ``prefix``."""
    return any(_claim(f"{prefix}.{index}") for index in range(count))


def _patch_engine() -> None:
    """Record every model run (which documents, in which process); slow it down; poison it."""
    from poolq.engine import PoolingEngine
    from poolq.worker.model_warmup import WARM_UP_TEXT

    original_run = PoolingEngine.run
    slow_s = float(_ENV.get("POOLQ_FAULT_SLOW_S", "0"))
    poison = _ENV.get("POOLQ_FAULT_POISON_MARKER")

    def run(self, requests, policy=None, **options):
        requests = list(requests)
        keys = [request.key for request in requests]
        # The interactive lane's runs are urgent, a pool child's warm-up run is its one text: both are
        # recorded apart, so job records are counted alone.
        warm_up = [request.text for request in requests] == [WARM_UP_TEXT]
        kind = "lane_runs" if options.get("urgent") else "warm_up_runs" if warm_up else "model_runs"
        if poison and kind == "model_runs" and any(poison in request.text for request in requests):
            _record("poisoned", keys=keys)
            os._exit(1)
        _record(kind, keys=keys)
        for result in original_run(self, iter(requests), policy, **options):
            if slow_s:
                time.sleep(slow_s)
            yield result

    PoolingEngine.run = run


def _patch_planning() -> None:
    """Slow planning down line by line (POOLQ_FAULT_SLOW_PLAN_S), recording that it started."""
    slow_s = float(_ENV.get("POOLQ_FAULT_SLOW_PLAN_S", "0"))
    if not slow_s:
        return
    from poolq.jobs.planning import sections

    original_lines = sections.section_lines

    def section_lines(ctx, section, *args, **kwargs):
        _record("planning", uri=section.uri)
        for item in original_lines(ctx, section, *args, **kwargs):
            time.sleep(slow_s)
            yield item

    sections.section_lines = section_lines


def _patch_commit() -> None:
    marker = _ENV.get("POOLQ_FAULT_EXIT_AFTER_COMMIT")
    if not marker:
        return
    from poolq.jobs.ledger.job_ledger import JobLedger

    original_commit = JobLedger.commit

    def commit(self, shard, shard_commit):
        won = original_commit(self, shard, shard_commit)
        if won and _claim(marker):
            _record("exit_after_commit", shard=shard, attempt=shard_commit.attempt)
            os._exit(1)
        return won

    JobLedger.commit = commit


def _patch_deliveries() -> None:
    """Record each delivery of a shard task and what it returned (None: no commit by this delivery)."""
    from poolq.worker import celery_tasks as tasks

    original_run_shard = tasks.run_shard

    def run_shard(job, shard):
        _record("deliveries", job_id=job.id, shard=shard)
        commit = original_run_shard(job, shard)
        _record("delivery_results", job_id=job.id, shard=shard, attempt=commit.attempt if commit else None)
        return commit

    tasks.run_shard = run_shard


class _Body:
    """The ``raw`` of a canned botocore response."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def _slow_down(request):
    from botocore.awsrequest import AWSResponse

    body = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
            b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
    return AWSResponse(request.url, 503, {"Content-Type": "application/xml", "Content-Length": str(len(body))}, _Body(body))


def _s3_fault_handler():
    """A ``before-send.s3.PutObject`` handler for the S3 faults configured, or None."""
    first_n = int(_ENV.get("POOLQ_FAULT_S3_503", "0"))
    first_n_substring = _ENV.get("POOLQ_FAULT_S3_KEY_SUBSTRING", "/")
    always_substring = _ENV.get("POOLQ_FAULT_S3_FAIL_KEY_SUBSTRING")
    after_write_substring = _ENV.get("POOLQ_FAULT_S3_503_AFTER_WRITE")
    log_dir = _ENV.get("POOLQ_FAULT_LOG_DIR", "/tmp")
    if not (first_n or always_substring or after_write_substring):
        return None

    def handler(request, **_):
        url = request.url.split("?", 1)[0]
        if always_substring and always_substring in url:
            _record("s3_faults", mode="always", url=url)
            return _slow_down(request)
        if first_n and first_n_substring in url and _claim_one_of(os.path.join(log_dir, "s3-503"), first_n):
            _record("s3_faults", mode="first_n", url=url)
            return _slow_down(request)
        if after_write_substring and after_write_substring in url and _claim(os.path.join(log_dir, "s3-after-write")):
            from botocore.httpsession import URLLib3Session

            written = URLLib3Session().send(request)  # the write happens...
            _record("s3_faults", mode="after_write", url=url, status=written.status_code)
            return _slow_down(request)  # ...but the caller hears 503
        return None

    return handler


def _patch_s3() -> None:
    handler = _s3_fault_handler()
    if handler is None:
        return
    import poolq.storage
    from poolq.jobs.settings.groups import storage as store_settings
    from poolq.storage import s3_store

    original_make = s3_store.make_s3_client

    def make_s3_client(config):
        client = original_make(config)
        client.meta.events.register_first("before-send.s3.PutObject", handler)
        return client

    # Every name the worker's code reaches the factory by.
    s3_store.make_s3_client = make_s3_client
    poolq.storage.make_s3_client = make_s3_client
    store_settings.make_s3_client = make_s3_client


def _patch_broker() -> None:
    from poolq.worker import worker_startup

    visibility_s = _ENV.get("POOLQ_FAULT_BROKER_VISIBILITY_S")
    restore_s = _ENV.get("POOLQ_FAULT_RESTORE_INTERVAL_S")
    original_create = worker_startup.create_celery_app

    def create_celery_app(settings):
        app = original_create(settings)
        transport = dict(app.conf.broker_transport_options)
        if visibility_s:
            transport["visibility_timeout"] = float(visibility_s)
            app.conf.visibility_timeout = float(visibility_s)
        if restore_s:
            transport.update(unacked_restore_interval=float(restore_s), unacked_restore_throttle=1)
        app.conf.broker_transport_options = transport
        return app

    worker_startup.create_celery_app = create_celery_app


def _serve_forks(orders_dir: Path) -> None:
    """Fork a worker for each order that appears in ``orders_dir``, until the test process is gone.
    In a forked worker this never returns: the worker's ``sys.exit`` ends that process."""
    test_process = os.getppid()
    running: dict[int, Path] = {}  # worker pid -> where its exit code goes
    while os.getppid() == test_process:
        for order in sorted(orders_dir.glob("*.json")):
            taken = order.with_suffix(".taken")
            os.replace(order, taken)
            pid = os.fork()
            if pid == 0:
                _become_worker(json.loads(taken.read_text()))
            running[pid] = order.with_suffix(".exit")
            _write_atomically(order.with_suffix(".pid"), str(pid))
        _reap(running)
        time.sleep(0.05)
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def _become_worker(order: dict) -> None:
    """In the forked child: its own session, the order's log file and environment; then the worker."""
    os.setsid()
    log = os.open(order["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    for source, target in ((devnull, 0), (log, 1), (log, 2)):
        os.dup2(source, target)
    os.close(log)
    os.close(devnull)
    os.environ.clear()
    os.environ.update(order["env"])
    _run_worker()


def _reap(running: dict[int, Path]) -> None:
    """Collect the exit codes of workers that ended (each exit file is written once, whole)."""
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in running:
            _write_atomically(running.pop(pid), str(os.waitstatus_to_exitcode(status)))


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _die_with_the_test_run() -> None:
    """If the test process that started this worker dies, take the worker's process group down too."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-the-test-run", daemon=True).start()


def main() -> None:
    # The model code's imports (torch, the loader, transformers' config and tokenizer classes are most of
    # a model load), done once before the fork. BERT's modeling code too: MiniLM loads without it, but
    # SPLADE (a BertForMaskedLM) loads through it, and a new pool child would otherwise import it inside
    # its first shard's time limit (BASE_SETTINGS: 5 s soft, 6 s hard), which a loaded CI machine ran past.
    import safetensors.torch  # noqa: F401
    import transformers.models.auto.modeling_auto  # noqa: F401
    import transformers.models.bert.modeling_bert  # noqa: F401
    from transformers import AutoConfig, AutoTokenizer  # noqa: F401

    import poolq.engine.loading.model_loader  # noqa: F401
    import poolq.jobs.settings  # noqa: F401
    import poolq.worker.worker_startup  # noqa: F401

    if sys.argv[1:2] == ["--fork-server"]:
        _serve_forks(Path(sys.argv[2]))
        return
    _run_worker()


def _run_worker() -> None:
    from poolq.jobs.settings import Settings
    from poolq.worker.worker_startup import WorkerOptions, run_worker

    _patch_engine()
    _patch_planning()
    _patch_commit()
    _patch_deliveries()
    _patch_s3()
    _patch_broker()
    _die_with_the_test_run()
    sys.exit(run_worker(Settings(), WorkerOptions(concurrency=1, hostname=_ENV.get("POOLQ_FAULT_HOSTNAME"))))


if __name__ == "__main__":
    main()

"""Harness for the fault-injection suite: one real poolq deployment per test, and one checker.

Each test gets its own redis-server (AOF on, fresh port and directory) and its own prefix in a
bucket of the session's SeaweedFS, and starts what it needs: workers (through
``launch_worker.py``, which can inject faults), beat, the API. Every process is started in its
own session (process group), and every group is killed when the test ends, pass or fail.
Workers are forks of a launcher that already imported torch and transformers
(``WorkerForkServer``), so a worker is up in about a second.

``Deployment.check_outcome`` is the end-of-case check every test runs: the job's final state,
its output equal to a clean engine run's, every record exactly once (a listed part or the error
file), counts that add up, no live lease, nothing unacked or queued, no open multipart upload,
no unlisted part left behind.
"""
from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.key_signing import TEST_KEY_SIGNING_SECRET

from poolq.devtools.devstack.ports import ANY_PORT, wait_listening_port
from poolq.devtools.devstack.process import pid_alive, spawn, stop_pid
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.devtools.devstack.seaweed import SeaweedConfig, SeaweedServer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.steps.shards.shard_attempt import UNRUN_CODES
from poolq.storage import S3Config

LAUNCHER = Path(__file__).with_name("launch_worker.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
BUCKET = "poolq-faults"
TRUNCATE = {"mode": "truncate"}

# Short timeouts, so recoveries happen in seconds. Celery's: soft < hard < visibility / 2.
BASE_SETTINGS = {
    "shard_max_documents": 3,
    "lease_ttl_s": 3,
    "reconcile_interval_s": 1,
    "requeue_after_s": 3,
    "max_shard_crashes": 3,
    "cancel_check_interval_s": 0.3,
    "task_soft_time_limit_s": 5,
    "task_time_limit_s": 6,
    "visibility_timeout_s": 13,
    "task_retry_backoff_s": 0.2,
    "task_retry_backoff_max_s": 1,
    "s3_max_attempts": 2,  # botocore retries: 3 tries per S3 request
}
# kombu puts back unacked messages whose visibility timeout passed every ~100 s by default.
RESTORE_INTERVAL_S = 1


def eventually(
    probe: Callable[[], object], timeout: float, what: str, *, interval: float = 0.1, logs: Callable[[], str] = lambda: ""
):
    """Poll ``probe`` until it returns something truthy, and return that; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}{logs()}")
        time.sleep(interval)


@dataclass
class Proc:
    """A process this test started (the leader of its own process group)."""

    name: str
    pid: int
    log_path: Path
    marker: str  # what its command line contains: never signal a recycled pid
    exit_code: int | None = None
    exit_path: Path | None = None  # a worker forked by the fork server: its exit code is written here

    def alive(self) -> bool:
        if self.exit_code is not None:
            return False
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return self._alive_elsewhere()
        if pid == self.pid:
            self.exit_code = os.waitstatus_to_exitcode(status)
            return False
        return True

    def _alive_elsewhere(self) -> bool:
        """Not this process's child: alive while its pid is; a forked worker's exit code comes from the
        fork server, which writes it just after it reaps the worker."""
        if pid_alive(self.pid):
            return True
        if self.exit_path is not None:
            eventually(self.exit_path.exists, 5, f"{self.name}'s exit code from the fork server", interval=0.02)
            self.exit_code = int(self.exit_path.read_text())
        return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def children(self) -> list[int]:
        """Direct children (a worker's prefork pool)."""
        try:
            return [int(pid) for pid in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except FileNotFoundError:
            return []

    def wait_exit(self, timeout: float) -> int:
        eventually(lambda: not self.alive(), timeout, f"{self.name} (pid {self.pid}) to exit")
        return self.exit_code


def base_env() -> dict[str, str]:
    """Every process's environment before the deployment's settings: offline, one torch thread."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }


class WorkerForkServer:
    """One ``launch_worker.py --fork-server`` per test process: torch and transformers are imported
    once, and each worker is a fork of that process, up in about a second for no import CPU."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.orders = root / "orders"
        self.orders.mkdir()
        self.count = 0
        argv = [sys.executable, str(LAUNCHER), "--fork-server", str(self.orders)]
        log_path = root / "fork-server.log"
        self.server = Proc("fork-server", spawn(argv, log_path=log_path, pid_path=None, env=base_env(), cwd=REPO_ROOT),
                           log_path, LAUNCHER.name)

    def take(self, name: str, env: dict[str, str]) -> Proc:
        """A worker process running with ``env``, logging to its own file."""
        self.count += 1
        order = self.orders / f"{self.count}.json"
        log_path = self.root / f"{name}-{self.count}.log"
        tmp = order.with_suffix(".tmp")
        tmp.write_text(json.dumps({"env": env, "log": str(log_path)}))
        os.replace(tmp, order)
        pid_path = order.with_suffix(".pid")
        eventually(lambda: pid_path.exists() or not self.server.alive(), 90, "the fork server to fork a worker",
                   interval=0.02, logs=self.server.log)
        assert pid_path.exists(), f"the fork server exited ({self.server.exit_code}): {self.server.log()[-3000:]}"
        return Proc(name, int(pid_path.read_text()), log_path, LAUNCHER.name, exit_path=order.with_suffix(".exit"))

    def close(self) -> None:
        if not _group_gone(self.server.pid):
            os.killpg(self.server.pid, signal.SIGKILL)
        eventually(lambda: not self.server.alive(), 10, "the fork server to exit")


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@dataclass
class Deployment:
    """One poolq deployment: Redis, an S3 prefix, settings, and the processes a test starts."""

    tmp_path: Path
    redis: RedisServer
    s3_config: object
    prefix: str
    fork_server: WorkerForkServer
    overrides: dict = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    api_url: str | None = None
    job_fields: dict = field(default_factory=dict)  # e.g. model and task of the jobs submitted (default: embed)

    def __post_init__(self) -> None:
        self.fault_dir = self.tmp_path / "faults"
        self.fault_dir.mkdir()
        self.logs_dir = self.tmp_path / "logs"
        self._ctx = None
        self._redis_client = None
        self._reconciler: threading.Thread | None = None
        self._stop_reconciler = threading.Event()

    # -- configuration -----------------------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        settings = {**BASE_SETTINGS, **self.overrides}
        env = {
            **base_env(),
            "POOLQ_REDIS_URL": self.redis.url,
            "POOLQ_STORE": "s3",
            "POOLQ_BUCKET": BUCKET,
            "POOLQ_OUTPUT_PREFIX": self.prefix,
            "POOLQ_S3_ENDPOINT_URL": self.s3_config.endpoint_url,
            "POOLQ_S3_ACCESS_KEY_ID": self.s3_config.access_key_id,
            "POOLQ_S3_SECRET_ACCESS_KEY": self.s3_config.secret_access_key,
            "POOLQ_DEVICE": "cpu",
        }
        env.update({f"POOLQ_{name.upper()}": str(value) for name, value in settings.items()})
        return env

    @property
    def settings(self):
        from poolq.jobs.settings import Settings

        return Settings(**{**BASE_SETTINGS, **self.overrides}, redis_url=self.redis.url, store="s3", bucket=BUCKET,
                        output_prefix=self.prefix, s3_endpoint_url=self.s3_config.endpoint_url,
                        s3_access_key_id=self.s3_config.access_key_id,
                        s3_secret_access_key=self.s3_config.secret_access_key)

    def new_ctx(self):
        """A job context in the test process, built as a worker builds its own."""
        from poolq.worker.celery_app import create_celery_app
        from poolq.worker.celery_tasks import build_worker_context

        settings = self.settings
        return build_worker_context(create_celery_app(settings), settings)

    @property
    def ctx(self):
        """The test's job context: ledger, status, leases, queues."""
        if self._ctx is None:
            self._ctx = self.new_ctx()
        return self._ctx

    def run_reconciler(self) -> None:
        """Run ``poolq.worker.reconciler.reconcile`` every ``reconcile_interval_s`` in this process (instead of beat)."""
        from poolq.worker.reconciler import reconcile

        ctx, interval = self.new_ctx(), self.settings.reliability.reconcile_interval_s

        def loop() -> None:
            while not self._stop_reconciler.wait(interval):
                try:
                    reconcile(ctx)
                except Exception:  # noqa: BLE001 - Redis may be away for a moment; try again next round
                    pass

        self._reconciler = threading.Thread(target=loop, name="reconciler", daemon=True)
        self._reconciler.start()

    def stop_reconciler(self) -> None:
        self._stop_reconciler.set()
        if self._reconciler is not None:
            self._reconciler.join()

    @property
    def redis_client(self):
        import redis

        if self._redis_client is None:
            self._redis_client = redis.Redis.from_url(self.redis.url)
        return self._redis_client

    # -- processes -----------------------------------------------------------------------------
    def spawn_process(self, name: str, argv: list[str], marker: str, env: dict[str, str] | None = None) -> Proc:
        """Start ``argv`` detached (its own process group), with the deployment's environment."""
        proc = Proc(name, 0, self.logs_dir / f"{name}.log", marker)
        proc.pid = spawn(argv, log_path=proc.log_path, pid_path=None, env=env or self.env, cwd=REPO_ROOT)
        self.procs.append(proc)
        return proc

    def start_worker(self, name: str = "w1", *, wait: bool = True, settings: dict | None = None,
                     **faults: object) -> Proc:
        """A worker through the fault launcher; ``faults`` are ``POOLQ_FAULT_<NAME>`` values, ``settings``
        this worker's own ``POOLQ_<NAME>`` values (a fleet of unlike workers)."""
        env = {**self.env, "POOLQ_FAULT_LOG_DIR": str(self.fault_dir), "POOLQ_FAULT_HOSTNAME": f"{name}@%h",
               "POOLQ_FAULT_RESTORE_INTERVAL_S": str(RESTORE_INTERVAL_S)}
        env.update({f"POOLQ_{key.upper()}": str(value) for key, value in (settings or {}).items()})
        env.update({f"POOLQ_FAULT_{key.upper()}": str(value) for key, value in faults.items()})
        proc = self.fork_server.take(name, env)
        self.procs.append(proc)
        self.logs_dir.mkdir(exist_ok=True)
        (self.logs_dir / f"{name}.log").symlink_to(proc.log_path)  # the log lives in the fork server's dir
        if wait:
            self.wait_ready(proc)
        return proc

    def wait_ready(self, *procs: Proc, timeout: float = 90) -> None:
        """Wait until each worker says " ready." (beat: "beat: Starting"); fail if one exits first."""
        for proc in procs:
            needle = "beat: Starting" if proc.name == "beat" else " ready."
            self.wait(lambda: needle in proc.log() or not proc.alive(), timeout, f"{proc.name} to be ready", 0.1)
            assert needle in proc.log(), f"{proc.name} exited ({proc.exit_code}) before it was ready{self.logs()}"

    def start_beat(self, *, wait: bool = True) -> Proc:
        proc = self.spawn_process("beat", [sys.executable, "-m", "poolq.api", "beat"], "beat")
        if wait:
            self.wait_ready(proc)
        return proc

    def start_api(self) -> str:
        import httpx

        # Port 0: uvicorn binds one the kernel picks (no other process can take it first); it is the
        # one its process listens on.
        argv = [sys.executable, "-m", "uvicorn", "poolq.api.server.app:create_app", "--factory",
                "--host", "127.0.0.1", "--port", "0"]
        proc = self.spawn_process("api", argv, "uvicorn")
        port = wait_listening_port(proc.pid, 60, "the API", log_path=proc.log_path)
        self.api_url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{self.api_url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        self.wait(lambda: healthy() or not proc.alive(), 60, "the API to answer /healthz", 0.1)
        assert proc.alive(), f"the API exited ({proc.exit_code}){self.logs()}"
        return self.api_url

    def client(self):
        from poolq.api.client.poolq_client import PoolqClient

        return PoolqClient(self.api_url, self.api_key)

    @property
    def api_key(self) -> str:
        """A key of this deployment's test tenant, created on first use (the API requires one)."""
        if getattr(self, "_api_key", None) is None:
            from poolq.jobs.tenancy.api_keys import ApiKeyStore

            self._api_key, _ = ApiKeyStore(self.ctx.store, self.prefix, signing_secret=TEST_KEY_SIGNING_SECRET).create(
                "faults", admin=True)
        return self._api_key

    def stop(self, proc: Proc, timeout: float = 10) -> None:
        if proc.alive():
            stop_pid(proc.pid, expect_in_cmdline=proc.marker, timeout=timeout)
        proc.alive()

    def kill_group(self, proc: Proc) -> None:
        """``kill -9`` of the process and everything in its group (a worker and its pool)."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait_exit(10)
        eventually(lambda: _group_gone(proc.pid), 10, f"{proc.name}'s process group to die")

    def shutdown(self) -> None:
        """Kill (-9) every process group this test started; the test is over, nothing needs a clean exit."""
        self.stop_reconciler()
        for proc in self.procs:
            proc.alive()  # reap the leader if it exited: its group id stays ours while any member lives
            if not _group_gone(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            eventually(lambda: not proc.alive() and _group_gone(proc.pid), 10, f"{proc.name}'s processes to be gone")

    def logs(self) -> str:
        """The tail of each process's log; those that exited last, where a truncated CI log still shows them."""
        ordered = sorted(self.procs, key=lambda p: not p.alive())
        tails = [f"\n--- {p.name} (pid {p.pid}{'' if p.alive() else f', exited {p.exit_code}'}) ---\n"
                 + "\n".join(p.log().splitlines()[-25:]) for p in ordered]
        return "".join(tails)

    def wait(self, probe: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
        return eventually(probe, timeout, what, interval=interval, logs=self.logs)

    # -- jobs ----------------------------------------------------------------------------------
    def spec(self, documents: list[dict]) -> dict:
        return self.spec_for(documents, self.job_fields)

    @staticmethod
    def spec_for(documents: list[dict], job_fields: dict | None = None) -> dict:
        """The body of a job of ``documents`` (with ``job_fields``: model, task, ...), truncating."""
        records = [{key: d[key] for key in ("id", "text", "query") if key in d} for d in documents]
        return {"input": {"documents": records}, "long_documents": TRUNCATE, **(job_fields or {})}

    def submit(self, documents: list[dict], *, idempotency_key: str | None = None) -> str:
        """Submit over HTTP if this test started the API, else in process (``submit_job``)."""
        if self.api_url:
            with self.client() as client:
                return client.submit(self.spec(documents), idempotency_key=idempotency_key)["id"]
        from poolq.jobs.spec.job_spec import JobSpec
        from poolq.jobs.steps.submit import submit_job

        return submit_job(self.ctx, JobSpec.model_validate(self.spec(documents)), idempotency_key).id

    def status(self, job_id: str) -> dict:
        if self.api_url:
            with self.client() as client:
                return client.get(job_id)
        status = self.ctx.status.get(job_id)
        return {} if status is None else status.model_dump(mode="json")

    def wait_state(self, job_id: str, states: set[str] | str, timeout: float = 90) -> dict:
        states = {states} if isinstance(states, str) else states

        def reached():
            job = self.status(job_id)
            return job if job.get("status") in states else None

        return self.wait(reached, timeout, f"job {job_id} to become {sorted(states)}", interval=0.2)

    def leases(self, job_id: str) -> list[str]:
        return self.ctx.leases.live_units(job_id)

    def wait_shard_lease(self, job_id: str, timeout: float = 60) -> str:
        """Wait until some shard of the job is being embedded; return its unit (``shard-00001``)."""
        return self.wait(lambda: next((u for u in self.leases(job_id) if u.startswith("shard-")), None),
                         timeout, f"a lease on a shard of {job_id}", interval=0.05)

    def wait_started_embedding(self, timeout: float = 60) -> list[dict]:
        """Wait until a model run has started (the documents are going through the model)."""
        return self.wait(lambda: self.events("model_runs"), timeout, "a model run to start", interval=0.05)

    def events(self, kind: str) -> list[dict]:
        """What the launcher's patches recorded (``model_runs``, ``deliveries``, ``s3_faults``, ...)."""
        path = self.fault_dir / f"{kind}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def model_runs_per_document(self) -> Counter:
        """Model runs per record id (a score job's bi-encoder keys are [id, "text"] and [query, "query"])."""
        def record_of(key):
            return key if not isinstance(key, list) else (key[0] if key[1] == "text" else None)

        records = (record_of(key) for run in self.events("model_runs") for key in run["keys"])
        return Counter(record for record in records if record is not None)

    def send_task(self, name: str, args: list, queue: str) -> None:
        self.ctx.enqueuer.app.send_task(name, args=args, queue=queue)

    # -- the end-of-case check -----------------------------------------------------------------
    def check_outcome(self, job_id: str, documents: list[dict], reference: dict[str, np.ndarray], *,
                      state: str = "succeeded", failed: dict[str, str] | None = None, timeout: float = 90) -> dict:
        """Everything a finished job must satisfy, whatever happened on the way. Returns the manifest.

        ``failed``: id -> error code of the records expected in errors.jsonl (the others must be
        embedded, except in a cancelled job, where they may also be not processed).
        """
        failed = failed or {}
        final = self.wait_state(job_id, {"succeeded", "partially_succeeded", "failed", "cancelled"}, timeout)
        ctx = self.ctx
        layout = JobHandle.bind(ctx, job_id).layout
        assert ctx.store.exists(layout.manifest), f"job {job_id} is {final['status']} but has no manifest"
        manifest = json.loads(ctx.store.get(layout.manifest))  # the bucket's JSON, as its readers see it
        assert (final["status"], manifest["status"]) == (state, state), (final, manifest["status"], self.logs())

        # Every record exactly once: in a listed part, in errors.jsonl, or (cancelled) not processed.
        ids, vectors = [], []
        for part in manifest["parts"]:
            table = pq.read_table(io.BytesIO(ctx.store.get(part["key"])))
            assert table.num_rows == part["rows"]
            ids += table.column("id").to_pylist()
            vectors += row_values(table, manifest["task"])
        lines = [json.loads(line) for line in ctx.store.get(layout.errors).decode().splitlines()]
        errors = [line for line in lines if line["code"] not in UNRUN_CODES]  # a stop's unrun records are no failures
        assert state == "cancelled" or len(errors) == len(lines), lines
        error_ids = [error["id"] for error in lines]
        all_ids = {d["id"] for d in documents}
        assert len(ids) == len(set(ids)), f"ids embedded twice: {[i for i, n in Counter(ids).items() if n > 1]}"
        assert len(error_ids) == len(set(error_ids)), f"ids failed twice: {error_ids}"
        assert not set(ids) & set(error_ids), "ids both embedded and failed"
        assert {e["id"]: e["code"] for e in errors} == failed, errors
        if state == "cancelled":
            assert set(ids) | set(error_ids) <= all_ids
        else:
            assert set(ids) | set(error_ids) == all_ids
        # ... with the vectors of a clean run.
        if ids:
            expected = np.stack([reference[i] for i in ids])
            np.testing.assert_allclose(np.stack(vectors), expected, rtol=0, atol=1e-6)

        # Counts add up, in the manifest and in the status the API serves.
        counts = manifest["counts"]
        not_processed = len(all_ids) - len(ids) - len(errors)
        assert (counts["total"], counts["completed"], counts["failed"], counts["not_processed"]) == (
            len(documents), len(ids), len(errors), not_processed)
        assert final["counts"] == {"total": len(documents), "completed": len(ids), "failed": len(errors),
                                   "not_processed": not_processed}, final

        # Nothing left behind: leases, messages, uploads, losing attempts' parts, the active marker.
        self.wait(lambda: not self.leases(job_id), self.settings.reliability.lease_ttl_s + 5, f"the leases of {job_id} to end")
        self.stop_reconciler()  # the reconciler (and beat's periodic tasks) would keep the queues busy
        for proc in self.procs:
            if proc.name == "beat":
                self.stop(proc)
        client = self.redis_client
        settle_s = self.settings.tasks.visibility_timeout_s + 3 * RESTORE_INTERVAL_S + 5
        self.wait(lambda: not client.hlen("unacked") and not client.zcard("unacked_index"), settle_s,
                  "no unacked messages", interval=0.2)
        self.wait(lambda: not client.llen("gpu") and not client.llen("control"), 30, "empty queues", interval=0.2)
        assert ctx.store.pending_uploads(layout.root + "/") == []
        listed = sorted(part["key"] for part in manifest["parts"])
        assert sorted(ctx.store.list(layout.parts_prefix)) == listed, "unlisted parts left behind"
        committed_errors = sorted(commit.errors_key for commit in JobHandle.bind(ctx, job_id).ledger.commits().values())
        attempt_errors = sorted(key for key in ctx.store.list(layout.work_prefix) if key.endswith(".errors.jsonl"))
        assert attempt_errors == committed_errors, "losing attempts' error files left behind"
        assert not ctx.store.exists(ctx.service_layout.active(job_id))
        # The status is still the manifest's after everything settled (late deliveries change nothing).
        assert self.status(job_id)["counts"] == final["counts"]
        return manifest


@pytest.fixture
def chaos_seaweed(tmp_path):
    """A SeaweedFS of the test's own (with the suite's bucket), for tests that stop, start or stall it."""
    config = SeaweedConfig(data_dir=tmp_path / "seaweed", s3_port=ANY_PORT, access_key="poolqchaos",
                           secret_key="poolq-chaos-secret", bucket=BUCKET)
    server = SeaweedServer(config)
    with server:
        yield server


@pytest.fixture(scope="session")
def fault_bucket(seaweed):
    """A bucket of the session's SeaweedFS for this suite (each test works under its own prefix)."""
    from poolq.storage import make_s3_client

    client = make_s3_client(seaweed.s3_config)
    try:
        client.head_bucket(Bucket=BUCKET)
    except Exception:  # noqa: BLE001 - absent: create it
        client.create_bucket(Bucket=BUCKET)
    return seaweed.s3_config


SPLADE_VOCABULARY = 30522  # SPLADE-tiny's: sparse rows are compared as dense vectors of this size


def row_values(table, task: str) -> list[np.ndarray]:
    """Each row's output as one float32 array: the vector (embed), or the dense form of the sparse vector."""
    if task == "score":
        return [np.array([score], dtype=np.float32) for score in table.column("score").to_pylist()]
    if task == "sparse_embed":
        dense = []
        for indices, values in zip(table.column("sparse_indices").to_pylist(), table.column("sparse_values").to_pylist()):
            vector = np.zeros(SPLADE_VOCABULARY, dtype=np.float32)
            vector[indices] = values
            dense.append(vector)
        return dense
    return list(table.column("embedding").to_numpy(zero_copy_only=False))


def _clean_run(model: str, task_name: str, documents: list[dict]) -> dict[str, np.ndarray]:
    """Each document's output from a clean engine run (settings' engine config, truncate)."""
    from poolq.engine import PoolingEngine, PoolingRequest, PoolingTask, SparseVector
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import LongDocuments

    engine = PoolingEngine.from_pretrained(model, config=Settings().serving.engine_config(), dtype="float32")
    task = PoolingTask(task_name)
    requests = (PoolingRequest(key=d["id"], text=d["text"], task=task) for d in documents)
    outputs = {}
    for result in engine.run(requests, LongDocuments(**TRUNCATE).policy()):
        if isinstance(result.data, SparseVector):
            vector = np.zeros(SPLADE_VOCABULARY, dtype=np.float32)
            vector[result.data.token_ids] = result.data.weights
            outputs[result.key] = vector
        else:
            outputs[result.key] = np.asarray(result.data, dtype=np.float32)
    return outputs


@pytest.fixture(scope="session")
def reference(sample_documents) -> dict[str, np.ndarray]:
    """Each sample document's vector from a clean engine run."""
    return _clean_run("all-MiniLM-L6-v2", "embed", sample_documents)


SCORE_QUERY = "what is this article about?"


@pytest.fixture(scope="session")
def score_reference(sample_documents) -> dict[str, np.ndarray]:
    """Each sample document's cosine score against SCORE_QUERY (MiniLM, truncated), from a clean engine run."""
    from poolq.engine import PoolingEngine
    from poolq.jobs.settings import Settings
    from poolq.jobs.spec.job_spec import LongDocuments

    engine = PoolingEngine.from_pretrained("all-MiniLM-L6-v2", config=Settings().serving.engine_config(), dtype="float32")
    policy = LongDocuments(**TRUNCATE).policy()
    query = engine.embed([SCORE_QUERY], normalize=True, policy=policy)[0]
    texts = engine.embed([d["text"] for d in sample_documents], normalize=True, policy=policy)
    return ScoreReference({d["id"]: np.array([vector @ query], dtype=np.float32)
                           for d, vector in zip(sample_documents, texts)}, SCORE_QUERY)


class ScoreReference(dict):
    """Each document's expected score (a dict by id), and the query it was scored against."""

    def __init__(self, scores: dict[str, np.ndarray], query: str) -> None:
        super().__init__(scores)
        self.query = query


@pytest.fixture(scope="session")
def sparse_reference(sample_documents) -> dict[str, np.ndarray]:
    """Each sample document's SPLADE-tiny vector (dense form) from a clean engine run."""
    return _clean_run("splade-tiny", "sparse_embed", sample_documents)


@pytest.fixture(scope="session")
def worker_fork_server(tmp_path_factory):
    server = WorkerForkServer(tmp_path_factory.mktemp("worker-fork-server"))  # imports now, while other fixtures start
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def deployment(request, tmp_path, fault_bucket, worker_fork_server):
    """A fresh deployment; ``@pytest.mark.settings(...)`` overrides BASE_SETTINGS for a test."""
    marker = request.node.get_closest_marker("settings")
    overrides = dict(marker.kwargs) if marker else {}
    server = RedisServer(RedisConfig(data_dir=tmp_path / "redis", port=ANY_PORT))
    with server:
        prefix = f"faults/{request.node.name[:40].replace('[', '-').strip(']')}-{uuid.uuid4().hex[:8]}"
        stack = Deployment(tmp_path, server, fault_bucket, prefix, worker_fork_server, overrides)
        try:
            yield stack
        finally:
            stack.shutdown()


@pytest.fixture
def own_store_deployment(request, tmp_path, chaos_seaweed, worker_fork_server):
    """Like ``deployment``, on ``chaos_seaweed`` (a SeaweedFS the test may stop or stall)."""
    marker = request.node.get_closest_marker("settings")
    s3_config = S3Config(chaos_seaweed.endpoint_url, chaos_seaweed.config.access_key, chaos_seaweed.config.secret_key)
    server = RedisServer(RedisConfig(data_dir=tmp_path / "redis", port=ANY_PORT))
    with server:
        stack = Deployment(tmp_path, server, s3_config, "faults/own", worker_fork_server, dict(marker.kwargs) if marker else {})
        try:
            yield stack
        finally:
            stack.shutdown()


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "settings(**values): Settings overrides for the fault-suite deployment")


@pytest.fixture
def documents(sample_documents) -> list[dict]:
    """12 short real documents: 4 shards of 3."""
    return [{"id": d["id"], "text": d["text"]} for d in sample_documents[:12]]

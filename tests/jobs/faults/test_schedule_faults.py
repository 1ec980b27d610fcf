"""Scheduled reindex with real processes: Redis, SeaweedFS, the API (uvicorn), a Celery worker and
two ``python -m poolq.api beat`` processes.

(a) Two beats for one schedule: one job per slot. RedBeat lets one beat fire at a time (the
    other waits on its lock and takes over when the first stops); duplicates still come from
    redelivered messages or a beat that fires late, so the schedule task is also sent twice by
    hand. To keep the test short, the schedule's RedBeat entry is re-saved with a 2-second
    *interval* (the stored cron stays ``* * * * *``): every firing within a minute is the same
    slot, so a minute of real cron firings is compressed into a few seconds.
(b) 100 documents under an input prefix: run 1, edit 3 objects' documents, run 2 embeds exactly
    those 3 (shard inputs, usage tokens, ``counts.carried == 97``) and its Parquet equals a
    from-scratch run over the edited data.
(c) A prefix that grows between runs, a newer upload re-sending an id: run 2 fails nothing (the
    older record is superseded, by S3's LastModified) and embeds only what is new or changed.

Self-contained: its own Redis and processes; only the session's SeaweedFS is shared (own prefix).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import redis
from celery.schedules import schedule as interval
from redbeat import RedBeatSchedulerEntry
from redbeat.schedulers import ensure_conf

from poolq.api.client.poolq_client import PoolqClient
from poolq.devtools.devstack.ports import ANY_PORT, wait_listening_port
from poolq.devtools.devstack.process import spawn, stop_pid, wait_until
from poolq.devtools.devstack.redis_server import RedisConfig, RedisServer
from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, SCHEDULE_TASK
from poolq.jobs.inputs.content_hash import content_hash
from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.ledger.job_ledger import Plan
from poolq.jobs.ledger.layout import ServiceLayout
from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.api_keys import ApiKeyStore
from poolq.products.schedules.beat_entries import entry_name
from poolq.products.schedules.schedule_store import ScheduleStore
from poolq.storage import read_embeddings
from poolq.worker.celery_app import create_celery_app

pytestmark = pytest.mark.integration
REPO_ROOT = Path(__file__).resolve().parents[3]
BUCKET = "poolq-test"  # the session SeaweedFS's bucket
TENANT = "reindex"


class Stack:
    """The processes of one deployment, their logs, and clients for it."""

    def __init__(self, root: Path, env: dict[str, str], settings: Settings, input_prefix: str) -> None:
        self.root, self.env, self.settings = root, env, settings
        self.input_prefix = input_prefix  # where the tests put their input objects
        self.pids: dict[str, int] = {}
        self.markers: dict[str, str] = {}  # what each process's command line holds: never signal a stranger
        self.store = settings.storage.object_store()
        self.api_url = ""
        self.api_key = ""

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def start(self, name: str, argv: list[str], ready: str | None, timeout: float = 90) -> None:
        pid = spawn(argv, log_path=self.log(name), pid_path=None, env=self.env, cwd=REPO_ROOT)
        self.pids[name] = pid
        self.markers[name] = argv[3] if argv[2] == "api" else argv[2]  # worker, beat, uvicorn
        if ready is not None:
            wait_until(lambda: ready in self.text(name), timeout, 0.2, name, log_path=self.log(name), pid=pid)

    def text(self, name: str) -> str:
        path = self.log(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, name: str) -> None:
        pid = self.pids.pop(name, None)
        if pid is not None:
            stop_pid(pid, expect_in_cmdline=self.markers[name], timeout=15)

    def stop_all(self) -> None:
        for name in list(self.pids)[::-1]:
            self.stop(name)

    def client(self) -> PoolqClient:
        if not self.api_key:
            self.api_key, _ = ApiKeyStore.from_settings(self.store, self.settings).create(TENANT, admin=True)
        return PoolqClient(self.api_url, self.api_key, timeout=60)


@pytest.fixture(scope="module")
def stack(seaweed, tmp_path_factory):
    root = tmp_path_factory.mktemp("schedule-stack")
    with RedisServer(RedisConfig(data_dir=root / "redis", port=ANY_PORT)) as redis_server:
        prefix = f"schedule-faults-{uuid.uuid4().hex[:8]}"
        config = seaweed.s3_config
        values = {
            "POOLQ_REDIS_URL": redis_server.url, "POOLQ_STORE": "s3", "POOLQ_BUCKET": BUCKET,
            "POOLQ_OUTPUT_PREFIX": f"{prefix}/jobs", "POOLQ_S3_ENDPOINT_URL": config.endpoint_url,
            "POOLQ_S3_ACCESS_KEY_ID": config.access_key_id, "POOLQ_S3_SECRET_ACCESS_KEY": config.secret_access_key,
            "POOLQ_SHARD_MAX_DOCUMENTS": "16", "POOLQ_RECONCILE_INTERVAL_S": "5",
            # the test tenant may read the inputs prefix (beyond its own uploads area)
            "POOLQ_TENANT_INPUT_PREFIXES": json.dumps({TENANT: [f"s3://{BUCKET}/{prefix}/inputs/"]}),
        }
        settings = Settings(**{key[len("POOLQ_"):].lower(): value for key, value in values.items()
                               if key != "POOLQ_TENANT_INPUT_PREFIXES"},
                            tenant_input_prefixes=json.loads(values["POOLQ_TENANT_INPUT_PREFIXES"]))
        stack = Stack(root, {**os.environ, **values}, settings, input_prefix=f"{prefix}/inputs")
        try:
            stack.start("worker", [sys.executable, "-m", "poolq.api", "worker", "--hostname", "sched@%h"], " ready.")
            stack.start("api", [sys.executable, "-m", "uvicorn", "poolq.api.server.app:create_app", "--factory",
                                "--host", "127.0.0.1", "--port", "0"], "Application startup complete")
            # port 0: the kernel picked it as uvicorn bound it (nobody took it first); its process says which
            port = wait_listening_port(stack.pids["api"], 30, "the API", log_path=stack.log("api"))
            stack.api_url = f"http://127.0.0.1:{port}"
            # Two beats: the first takes RedBeat's lock; the second starts and waits on the lock
            stack.start("beat-a", [sys.executable, "-m", "poolq.api", "beat"], "beat: Acquired lock")
            stack.start("beat-b", [sys.executable, "-m", "poolq.api", "beat"], "beat: Starting")
            yield stack
        finally:
            stack.stop_all()


def _put_jsonl(stack: Stack, key: str, docs: list[dict]) -> None:
    stack.store.put(key, "".join(json.dumps(d) + "\n" for d in docs).encode())


def _jobs_over(stack: Stack, uri: str) -> set[str]:
    """Every job submitted with this input: its spec is in the store."""
    jobs = set()
    for key in stack.store.list(stack.settings.storage.output_prefix + "/"):
        if key.endswith("/spec.json") and json.loads(stack.store.get(key))["input"]["uri"] == uri:
            jobs.add(key.split("/")[-2])
    return jobs


def test_two_beats_and_duplicate_triggers_give_one_job_per_slot(stack):
    # Given a schedule firing every minute, over a tiny input
    _put_jsonl(stack, f"{stack.input_prefix}/a/docs.jsonl", [{"id": "x", "text": "a scheduled document"}])
    uri = f"s3://{BUCKET}/{stack.input_prefix}/a/"
    with stack.client() as client:
        schedule = client.create_schedule({"cron": "* * * * *", "input": {"uri": uri}})
    app = create_celery_app(stack.settings)
    name = entry_name(schedule["id"])
    assert RedBeatSchedulerEntry.from_key(ensure_conf(app).key_prefix + name, app=app).schedule._orig_minute == "*"
    # When its RedBeat entry fires every 2 s (compressing a minute of cron firings into seconds)
    RedBeatSchedulerEntry(name, SCHEDULE_TASK, interval(timedelta(seconds=2)), args=[schedule["id"]],
                          options={"queue": CONTROL_QUEUE}, app=app).save()
    fired = lambda beat: stack.text(beat).count(f"Sending due task {name}")  # noqa: E731
    wait_until(lambda: fired("beat-a") >= 3, 30, 0.2, "beat-a firing the schedule 3 times")
    assert fired("beat-b") == 0 and "Acquired lock" not in stack.text("beat-b")  # one beat at a time
    # and the first beat stops: the second takes the lock over and fires the schedule too
    stack.stop("beat-a")
    wait_until(lambda: "Acquired lock" in stack.text("beat-b"), 40, 0.2, "beat-b taking RedBeat's lock")
    wait_until(lambda: fired("beat-b") >= 2, 20, 0.2, "beat-b firing the schedule")
    stack.stop("beat-b")
    # and the task is also delivered twice more, as a duplicated message would be
    for _ in range(2):
        app.send_task(SCHEDULE_TASK, args=[schedule["id"]], queue=CONTROL_QUEUE)
    # A beat stopped right after logging "Sending due task" may die before publishing it (at most
    # one lost per beat), so the worker's log is the count: every task it received (by id: a retry
    # is received again) has succeeded, and the control queue is empty.
    task_ids = lambda what: set(re.findall(rf"{re.escape(SCHEDULE_TASK)}\[([^\]]+)\] {what}", stack.text("worker")))  # noqa: E731
    broker = redis.Redis.from_url(stack.settings.broker.redis_url)
    at_least = fired("beat-a") + fired("beat-b")  # (fired - 2) from the beats, 2 by hand

    def drained() -> bool:
        received = task_ids("received")
        return broker.llen(CONTROL_QUEUE) == 0 and len(received) >= at_least and received == task_ids("succeeded")

    # 180 s: each trigger may plan and run a job on the one worker, slow on a loaded CI machine
    wait_until(drained, 180, 0.3, "the worker handling every schedule task sent")
    triggers = len(task_ids("succeeded"))
    # Then every slot has exactly one job, and no other job was submitted
    runs = ScheduleStore(stack.store, ServiceLayout(stack.settings.storage.output_prefix)).runs(schedule["id"])
    assert runs and all(run.job_id for run in runs)
    assert len({run.slot for run in runs}) == len(runs) == len({run.job_id for run in runs})
    assert _jobs_over(stack, uri) == {run.job_id for run in runs}
    assert len(runs) < triggers  # the triggers fell into fewer slots (one or two minutes) than there were triggers
    assert "Traceback" not in stack.text("worker")


def test_an_incremental_rerun_after_editing_3_of_100_documents_embeds_exactly_those_3(stack, sample_documents):
    # Given 100 documents in 10 objects under a prefix
    sentences = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    sentences = [s for s in sentences if 40 <= len(s) <= 300][:100]
    docs = [{"id": f"doc-{i:03d}", "text": text} for i, text in enumerate(sentences)]
    objects = {f"{stack.input_prefix}/b/part-{n:02d}.jsonl": docs[n * 10:(n + 1) * 10] for n in range(10)}
    for key, chunk in objects.items():
        _put_jsonl(stack, key, chunk)
    uri = f"s3://{BUCKET}/{stack.input_prefix}/b/"
    with stack.client() as client:
        schedule = client.create_schedule({"cron": "0 0 1 1 *", "input": {"uri": uri}})
        # When it runs, 3 objects get one edited document each, and it runs again
        first = _run(client, schedule["id"])
        edited_ids = []
        for n in (1, 4, 7):
            key = f"{stack.input_prefix}/b/part-{n:02d}.jsonl"
            objects[key][3] = {**objects[key][3], "text": objects[key][3]["text"] + " Amended."}
            _put_jsonl(stack, key, objects[key])
            edited_ids.append(objects[key][3]["id"])
        second = _run(client, schedule["id"])
        fresh = client.wait(client.submit({"input": {"uri": uri}})["id"], poll_interval=0.2, timeout=60)
        runs = client.get_schedule(schedule["id"])["runs"]
    assert [run["job_id"] for run in runs] == [second["job_id"], first["job_id"]]
    assert second["incremental_from"] == first["job_id"] and fresh["status"] == "succeeded"
    # Then run 2 embedded exactly the 3 edited documents
    job2 = ServiceLayout(stack.settings.storage.output_prefix).job(TENANT, second["job_id"])
    plan2 = Plan.from_json(json.loads(stack.store.get(job2.plan)))
    shard_inputs = [job2.shard_input(*plan2.shard_location(shard)) for shard in range(plan2.num_shards)]
    embedded = [record_id for key in shard_inputs for record_id in read_shard_records(
        ShardInput.from_bytes(stack.store.get(key)), InputFields(), stack.settings.storage.s3_config())]
    assert sorted(embedded) == edited_ids
    manifest2 = json.loads(stack.store.get(job2.manifest))
    manifest_fresh = json.loads(stack.store.get(
        ServiceLayout(stack.settings.storage.output_prefix).job(TENANT, fresh["id"]).manifest))
    assert manifest2["counts"]["carried"] == 97 and manifest2["counts"]["completed"] == 100
    table2 = _table(stack, manifest2)
    edited_rows = table2.filter(pa.compute.is_in(table2.column("id"), value_set=pa.array(edited_ids)))
    assert manifest2["usage"]["tokens"] == sum(edited_rows.column("num_tokens").to_pylist()) > 0
    # And its output equals the from-scratch run's (ids, hashes, tokens, vectors; counts)
    table_fresh = _table(stack, manifest_fresh)
    for column in ("id", "content_hash", "num_tokens", "truncated"):
        assert table2.column(column).to_pylist() == table_fresh.column(column).to_pylist(), column
    vectors = lambda t: np.stack(t.column("embedding").to_numpy(zero_copy_only=False))  # noqa: E731
    np.testing.assert_allclose(vectors(table2), vectors(table_fresh), atol=1e-6)
    # (the schedule's run reads its prefix superseding, and counts what it superseded: none here)
    same = lambda m: {k: v for k, v in m["counts"].items() if k not in ("carried", "superseded")}  # noqa: E731
    assert same(manifest2) == same(manifest_fresh) and manifest_fresh["counts"]["carried"] == 0
    assert manifest2["counts"]["superseded"] == 0 and "superseded" not in manifest_fresh["counts"]


def test_a_schedule_over_a_growing_prefix_supersedes_older_uploads_and_embeds_only_the_new(stack):
    # Given a schedule over a prefix holding one upload
    base = f"{stack.input_prefix}/c"
    first_upload = [{"id": "a", "text": "the first document"}, {"id": "b", "text": "the second document"}]
    # the second re-sends b, edited, and adds c; its key sorts first (upload keys are random)
    second_upload = [{"id": "b", "text": "the second document, edited"}, {"id": "c", "text": "a third document"}]
    _put_jsonl(stack, f"{base}/f7e1.jsonl", first_upload)
    with stack.client() as client:
        schedule = client.create_schedule({"cron": "0 0 1 1 *", "input": {"uri": f"s3://{BUCKET}/{base}/"}})
        # When it runs, the second upload lands (a second later at least: S3 dates objects to the second), it runs again
        first = _run(client, schedule["id"])
        _put_jsonl(stack, f"{base}/0c42.jsonl", second_upload)
        second = _run(client, schedule["id"])  # succeeded: no duplicate_id
    # Then run 2 embedded b and c only, carried a, and outputs the corpus with b's newest text
    layout = ServiceLayout(stack.settings.storage.output_prefix).job(TENANT, second["job_id"])
    manifest = json.loads(stack.store.get(layout.manifest))
    assert second["incremental_from"] == first["job_id"]
    assert manifest["counts"] == {**manifest["counts"], "total": 3, "completed": 3, "failed": 0, "carried": 1}
    assert Plan.from_json(json.loads(stack.store.get(layout.plan))).superseded == 1
    table = _table(stack, manifest)
    newest = {doc["id"]: doc["text"] for doc in first_upload + second_upload}
    assert table.column("id").to_pylist() == ["a", "b", "c"]
    assert table.column("content_hash").to_pylist() == [content_hash(newest[i]) for i in "abc"]


def _run(client: PoolqClient, schedule_id: str) -> dict:
    """Run the schedule now and wait for its job; returns the run."""
    run = client.run_schedule(schedule_id)
    job = client.wait(run["job_id"], poll_interval=0.2, timeout=90)
    assert job["status"] == "succeeded", job
    time.sleep(1.0)  # a manual run's slot is its second: the next run gets a slot of its own
    return run


def _table(stack: Stack, manifest: dict) -> pa.Table:
    tables = [read_embeddings(stack.store.get(part["key"])) for part in manifest["parts"]]
    return pa.concat_tables(tables).sort_by("id")

"""The job ledger on both stores (local and real S3): conditional writes decide, readers trust them."""
import uuid
from datetime import datetime, timezone

import pytest

from poolq.jobs.ledger.job_ledger import CarriedPart, JobLedger, Plan, ShardCommit
from poolq.jobs.ledger.layout import JobLayout
from poolq.jobs.ledger.manifest import JobManifest, ManifestCounts, ManifestErrors, ManifestShards, ManifestUsage
from poolq.jobs.spec.job_state import JobState
from poolq.storage import LocalObjectStore


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.integration)])
def store(request, tmp_path):
    """Like tests/storage's ``store`` fixture (not visible from here): local, and real S3 (SeaweedFS)."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "store")
    return request.getfixturevalue("new_buckets").store("ledger")


@pytest.fixture
def ledger(store) -> JobLedger:
    return JobLedger(store, JobLayout("jobs", uuid.uuid4().hex))


def _commit(ledger: JobLedger, shard: int, attempt: str, rows: int = 4) -> ShardCommit:
    layout = ledger.layout
    return ShardCommit(
        attempt=attempt, part_key=layout.attempt_part(shard, attempt), errors_key=layout.attempt_errors(shard, attempt),
        rows=rows, documents=rows, errors=0, tokens=10 * rows, dimensions=384,
    )


def test_the_first_commit_of_a_shard_wins(ledger):
    first, second = _commit(ledger, 3, "a" * 16, rows=4), _commit(ledger, 3, "b" * 16, rows=2)
    assert ledger.shard_commit(3) is None
    assert ledger.commit(3, first)
    assert not ledger.commit(3, second)
    assert ledger.shard_commit(3) == first


def test_commits_lists_every_committed_shard_and_nothing_else(ledger):
    store, layout = ledger.store, ledger.layout
    # Given shard inputs, attempt objects and commit markers side by side under work/
    for shard in range(3):
        store.put(layout.shard_input(0, shard), b'{"id": "x"}\n')
        store.put(layout.attempt_errors(shard, "c" * 16), b"")
    commits = {0: _commit(ledger, 0, "d" * 16), 2: _commit(ledger, 2, "e" * 16, rows=1)}
    for shard, commit in commits.items():
        ledger.commit(shard, commit)
    # Then commits() finds exactly the two markers, keyed by shard
    assert ledger.commits() == commits


def test_a_gave_up_commit_round_trips(ledger):
    commit = ShardCommit(
        attempt="f" * 16, part_key=None, errors_key=ledger.layout.attempt_errors(0, "f" * 16),
        rows=0, documents=0, errors=4, tokens=0, dimensions=None, gave_up=True,
    )
    assert ledger.commit(0, commit)
    assert ledger.shard_commit(0) == commit and ledger.commits() == {0: commit}


def test_the_plan_is_written_once_and_round_trips_with_carried_parts(ledger):
    assert ledger.plan() is None
    plan = Plan(
        section_shards=(2, 1), total=12, plan_errors=1,
        carried=(CarriedPart("jobs/old/parts/part-00000.x.parquet", rows=5, tokens=50), CarriedPart("jobs/old/p1", rows=2)),
        carried_records=7,
    )
    assert ledger.write_plan(plan)
    assert not ledger.write_plan(Plan(section_shards=(1,), total=1, plan_errors=0))  # a second planner loses
    read = ledger.plan()
    assert read == plan and isinstance(read.carried, tuple) and read.carried[1].tokens == 0
    assert read.num_shards == 3 and [read.shard_location(shard) for shard in range(3)] == [(0, 0), (0, 1), (1, 0)]


def test_cancel_is_a_durable_request(ledger):
    assert not ledger.cancel_requested()
    ledger.request_cancel("first reason")
    ledger.request_cancel("second reason")  # asking again is fine and keeps the first
    assert ledger.cancel_requested()
    assert b"first reason" in ledger.store.get(ledger.layout.cancel)


def _manifest(status: JobState) -> JobManifest:
    return JobManifest(
        job_id="j", status=status, model="m", task="embed", options={}, columns=["id", "embedding"], dimensions=8,
        counts=ManifestCounts(total=1, completed=1, failed=0), shards=ManifestShards(total=1, committed=1),
        usage=ManifestUsage(tokens=3), parts=[], errors=ManifestErrors(key="e", uri="s3://b/e", count=0),
        finished_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )


def test_the_manifest_is_written_once(ledger):
    assert ledger.manifest() is None
    assert ledger.write_manifest(_manifest(JobState.SUCCEEDED))
    assert not ledger.write_manifest(_manifest(JobState.FAILED))
    assert ledger.manifest() == _manifest(JobState.SUCCEEDED)


def test_the_spec_is_read_from_the_ledger(ledger):
    assert ledger.spec() is None
    ledger.store.put(ledger.layout.spec, b'{"input": {"uri": "s3://b/in.jsonl"}}')
    assert ledger.spec().input.uri == "s3://b/in.jsonl"

"""Cancelling jobs and Idempotency-Key submissions: plain functions, then the HTTP contract."""
import pytest
from support.api_client import authed_client
from support.job_doubles import RecordingEnqueuer
from support.job_doubles import drain as _drain

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.cancel import JobAlreadyFinished, JobNotFound, cancel_job
from poolq.jobs.steps.submit import IdempotencyConflict, submit_job
from poolq.storage import LocalObjectStore, StorageError

BODY = {"input": {"documents": [{"id": "a", "text": "first document"}, {"id": "b", "text": "second one"}]}}
OTHER_BODY = {"input": {"documents": [{"id": "c", "text": "a different document"}]}}


@pytest.fixture
def queued_ctx(local_ctx):
    """Jobs stay queued until ``_drain(ctx)``."""
    local_ctx.enqueuer = RecordingEnqueuer()
    return local_ctx


def _spec(body=BODY) -> JobSpec:
    return JobSpec.model_validate(body)


# Cancel


def test_cancelling_a_queued_job_ends_it_cancelled_with_no_parts(queued_ctx):
    ctx = queued_ctx
    job_id = submit_job(ctx, _spec()).id
    # When a job whose plan has not run is cancelled
    assert cancel_job(JobHandle.bind(ctx, job_id)).status is JobState.CANCELLING  # its finalizer is queued
    _drain(ctx)  # the queued plan task arrives late, then the finalizer
    # Then it is cancelled, nothing was planned, and its manifest lists no parts
    ledger = JobHandle.bind(ctx, job_id).ledger
    assert ctx.status.get(job_id).status is JobState.CANCELLED
    assert ledger.plan() is None and ledger.commits() == {}
    manifest = ledger.manifest()
    assert manifest.status is JobState.CANCELLED and manifest.parts == []
    # And its 2 inline documents are counted as not processed (an s3:// input, never read, counts 0)
    assert manifest.counts.model_dump() == {"total": 2, "completed": 0, "failed": 0, "not_processed": 2, "carried": 0, "rows": 0}
    assert ctx.status.get(job_id).counts.total == 2
    assert not ctx.store.exists(ctx.service_layout.active(job_id))


def test_cancelling_a_finished_job_is_refused(local_ctx):
    job_id = submit_job(local_ctx, _spec()).id  # runs to the end inline
    assert local_ctx.status.get(job_id).status is JobState.SUCCEEDED
    with pytest.raises(JobAlreadyFinished) as raised:
        cancel_job(JobHandle.bind(local_ctx, job_id))
    assert raised.value.status.status is JobState.SUCCEEDED
    assert not JobHandle.bind(local_ctx, job_id).ledger.cancel_requested()


def test_cancelling_an_unknown_job_is_not_found(local_ctx):
    for job_id in ("0" * 32, "not-a-job-id"):
        with pytest.raises(JobNotFound):
            cancel_job(JobHandle.bind(local_ctx, job_id))


# Idempotency-Key


def test_the_same_key_returns_the_same_job(local_ctx):
    first = submit_job(local_ctx, _spec(), idempotency_key="key-1")
    again = submit_job(local_ctx, _spec(), idempotency_key="key-1")
    other = submit_job(local_ctx, _spec(), idempotency_key="key-2")
    assert again.id == first.id and other.id != first.id
    assert again.status is JobState.SUCCEEDED  # the replay reports the job as it is now
    # Only two jobs were ever created
    assert len(list(local_ctx.store.list("_idempotency/"))) == 2
    assert sum(key.endswith("/spec.json") for key in local_ctx.store.list("")) == 2


def test_the_same_key_with_a_different_body_is_a_conflict(local_ctx):
    submit_job(local_ctx, _spec(), idempotency_key="key-1")
    with pytest.raises(IdempotencyConflict):
        submit_job(local_ctx, _spec(OTHER_BODY), idempotency_key="key-1")


class FailOnce(LocalObjectStore):
    """Fails the first write of a key that ``dies_at`` matches (the submitting process died there)."""

    def __init__(self, root, dies_at) -> None:
        super().__init__(root)
        self.dies_at, self.failed = dies_at, False

    def put(self, key, data, *, if_absent=False):
        if self.dies_at(key) and not self.failed:
            self.failed = True
            raise StorageError(f"died before writing {key}")
        super().put(key, data, if_absent=if_absent)


@pytest.mark.parametrize(
    "dies_at",
    [
        lambda key: key.endswith("/input.jsonl"),  # claim written, nothing else
        lambda key: key.endswith("/spec.json"),  # claim and input written, spec not
        lambda key: key.startswith("_active/"),  # spec written, not yet on the active list
    ],
    ids=["before-input", "before-spec", "before-active-marker"],
)
def test_a_half_done_submission_is_completed_by_the_retry(local_ctx, dies_at):
    ctx = local_ctx
    ctx.store = FailOnce(ctx.store.root, dies_at)
    # Given a submission that claimed its key and died part-way
    with pytest.raises(StorageError):
        submit_job(ctx, _spec(), idempotency_key="retry-me")
    (claim,) = ctx.store.list("_idempotency/")
    # When the client retries with the same key
    status = submit_job(ctx, _spec(), idempotency_key="retry-me")
    # Then the claimed job is completed and runs to the end
    assert f'"job_id": "{status.id}"' in ctx.store.get(claim).decode()
    assert ctx.status.get(status.id).status is JobState.SUCCEEDED
    assert JobHandle.bind(ctx, status.id).ledger.manifest().counts.completed == 2
    assert not ctx.store.exists(ctx.service_layout.active(status.id))


# The HTTP contract


@pytest.fixture
def api(local_ctx):
    return authed_client(local_ctx)


@pytest.fixture
def queued_api(queued_ctx):
    return authed_client(queued_ctx)


def test_cancel_route_accepts_a_running_job_and_404s_an_unknown_one(queued_api):
    queued = queued_api.post("/v1/jobs", json=BODY).json()
    response = queued_api.post(f"/v1/jobs/{queued['id']}/cancel")
    assert response.status_code == 202
    assert response.json()["id"] == queued["id"] and response.json()["status"] == "cancelling"
    assert queued_api.post(f"/v1/jobs/{'0' * 32}/cancel").status_code == 404
    assert queued_api.post("/v1/jobs/not-a-job/cancel").status_code == 404


def test_cancel_route_refuses_a_finished_job_with_409(api):
    finished = api.post("/v1/jobs", json=BODY).json()  # runs to the end inline
    assert api.get(f"/v1/jobs/{finished['id']}").json()["status"] == "succeeded"
    conflict = api.post(f"/v1/jobs/{finished['id']}/cancel")
    assert conflict.status_code == 409 and "already finished" in conflict.json()["detail"]


def test_idempotency_key_header(api):
    first = api.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "abc"})
    replay = api.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "abc"})
    assert first.status_code == replay.status_code == 202
    assert replay.json()["id"] == first.json()["id"]
    assert replay.headers["Location"].endswith(f"/v1/jobs/{first.json()['id']}")
    conflict = api.post("/v1/jobs", json=OTHER_BODY, headers={"Idempotency-Key": "abc"})
    assert conflict.status_code == 422
    assert ["header", "idempotency-key"] in [error["loc"] for error in conflict.json()["detail"]]
    assert api.post("/v1/jobs", json=BODY).json()["id"] != first.json()["id"]  # no key, new job


def test_a_cancel_asked_while_the_last_running_shard_commits_whole_still_ends_the_job(queued_ctx, monkeypatch):
    from poolq.jobs.steps.shards import shard_runner

    ctx = queued_ctx
    ctx.settings = ctx.settings.with_values(shard_max_documents=1)
    job_id = submit_job(ctx, _spec()).id
    _drain(ctx, only=frozenset({"plan"}))
    job = JobHandle.bind(ctx, job_id)
    assert job.ledger.plan().num_shards == 2
    commit_attempt = shard_runner.commit_attempt

    def cancel_then_commit(job, shard, commit):
        # every record embedded, no cancel seen; the cancel is asked now, before the commit: it sees
        # this shard's lease and an uncommitted shard, and leaves the finalizer to the shard
        cancel_job(job)
        return commit_attempt(job, shard, commit)

    monkeypatch.setattr(shard_runner, "commit_attempt", cancel_then_commit)
    # When shard 0 runs to its end and the cancel comes just before it commits
    [(kind, _, shard)] = [task for task in ctx.enqueuer.tasks if task[0] == "shard"][:1]
    ctx.enqueuer.tasks.remove((kind, job_id, shard))
    shard_runner.run_shard(job, shard)
    # Then the shard's end sends the finalizer, and the job ends cancelled with shard 0's rows
    assert ("finalize", job_id) in ctx.enqueuer.tasks
    _drain(ctx)
    manifest = job.ledger.manifest()
    assert ctx.status.get(job_id).status is JobState.CANCELLED and manifest.status is JobState.CANCELLED
    assert manifest.counts.completed == 1 and manifest.counts.not_processed == 1

"""Delivery against a real HTTP receiver on a loopback port, which checks every signature with the
Standard Webhooks reference library: jobs run in process (recorded tasks, drained in order), each
event's delivery attempted as the worker's task attempts it."""
import json

import pytest
from support.job_doubles import RecordingEnqueuer, drain
from support.webhook_receiver import receiving

from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.status.current_status import current_status, recover_status
from poolq.jobs.steps.cancel import cancel_job
from poolq.jobs.steps.failures import fail_job
from poolq.jobs.steps.finalizer import finalize_job
from poolq.jobs.steps.submit import JobRejected, submit_job
from poolq.products.webhooks.delivery import deliver_event
from poolq.products.webhooks.events import send_job_event
from poolq.products.webhooks.webhook_secrets import WebhookSecretStore
from poolq.worker.local_runner import local_context

TENANT = "acme"
STEPS = frozenset({"plan", "plan_section", "shard", "finalize"})


@pytest.fixture
def receiver():
    with receiving() as receiver:
        yield receiver


def _context(tmp_path, engine, receiver, **settings):
    allow = f"http://127.0.0.1:{receiver.port}, http://localhost:{receiver.port}"
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, webhook_allow=allow,
                                                   webhook_retry_base_s=2.0, **settings))
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    ctx.enqueuer = RecordingEnqueuer()
    receiver.secret = WebhookSecretStore(ctx.store, ctx.settings.storage.output_prefix).ensure(TENANT).current.secret
    return ctx


def _spec(url: str) -> JobSpec:
    documents = [{"id": f"d{i}", "text": f"document number {i} about webhooks"} for i in range(6)]
    return JobSpec.model_validate({"input": {"documents": documents}, "webhook": {"url": url}})


def _finished_job(ctx, url: str) -> str:
    job_id = submit_job(ctx, _spec(url), tenant=TENANT).id
    drain(ctx, only=STEPS)
    return job_id


def _webhook_tasks(ctx):
    return [task for task in ctx.enqueuer.take() if task[0] == "webhook"]


def test_a_finished_job_queues_its_end_event_once_and_it_is_delivered_signed(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    assert _webhook_tasks(ctx) == [("webhook", job_id, JOB_ENDED, 0, 0.0)]
    assert current_status(JobHandle.bind(ctx, job_id)).webhook.state == "pending"

    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    [request] = receiver.requests
    assert request.verified is True and request.path == "/hook"
    event = json.loads(request.body)
    assert event["type"] == "job.succeeded" and event["data"]["job_id"] == job_id
    assert event["data"]["counts"]["completed"] == 6 and event["data"]["manifest_uri"].endswith("manifest.json")
    webhook = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert (webhook.state, webhook.attempts, webhook.last_status, webhook.error) == ("delivered", 1, 200, None)
    assert webhook.event_id == request.headers["webhook-id"]

    finalize_job(JobHandle.bind(ctx, job_id))  # a finalize redelivered later queues nothing more
    assert _webhook_tasks(ctx) == [] and deliver_event(ctx, job_id, JOB_ENDED) is None
    assert len(receiver.requests) == 1


def test_a_500_is_retried_after_the_back_off_with_the_same_id(tmp_path, minilm_engine, receiver):
    receiver.statuses = [500, 200]
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    assert deliver_event(ctx, job_id, JOB_ENDED) == 2.0  # the next attempt in webhook_retry_base_s
    pending = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert (pending.state, pending.attempts, pending.last_status) == ("pending", 1, 500)
    assert "HTTP 500" in pending.error
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] and first.body == second.body
    assert first.verified and second.verified
    done = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert (done.state, done.attempts, done.last_status, done.error) == ("delivered", 2, 200, None)


def test_an_event_queued_twice_starts_one_chain_of_attempts(tmp_path, minilm_engine, receiver):
    receiver.statuses = [500]
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=0) == 2.0  # the first message: attempt 0 made
    # its duplicate sends nothing; it queues attempt 1 again (the first may have died before it did)
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=0) == 2.0 and len(receiver.requests) == 1
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=1) == 4.0  # attempt 1, made once ...
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=1) == 4.0  # ... however often it is queued
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=0) is None  # an older attempt's message: nothing
    assert len(receiver.requests) == 2 and current_status(JobHandle.bind(ctx, job_id)).webhook.attempts == 2


def test_retries_stop_when_the_retry_window_is_over(tmp_path, minilm_engine, receiver):
    receiver.statuses = [503]
    ctx = _context(tmp_path, minilm_engine, receiver, webhook_retry_for_s=1.0)
    job_id = _finished_job(ctx, receiver.url())
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    webhook = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert webhook.state == "failed" and webhook.error.startswith("gave up after 1 attempts: HTTP 503")


def test_a_redirect_is_not_followed_and_ends_the_delivery(tmp_path, minilm_engine, receiver):
    receiver.statuses = [302]
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    assert [request.path for request in receiver.requests] == ["/hook"]  # never /redirected
    webhook = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert (webhook.state, webhook.last_status) == ("failed", 302)
    assert "redirect" in webhook.error and "not followed" in webhook.error


def test_a_name_resolving_to_loopback_is_refused_when_no_entry_permits_it(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url(host="localhost"))  # allowed by name: checked at delivery
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    assert receiver.requests == []
    webhook = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert webhook.state == "failed" and webhook.attempts == 1 and webhook.last_status is None
    assert "loopback address" in webhook.error and "no allow-list entry permits it" in webhook.error


def test_a_url_outside_the_allow_list_is_refused_at_submit_naming_the_field(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    for url in (f"http://127.0.0.1:{receiver.port + 1}/hook", "https://hooks.example.com/", "file:///etc/passwd"):
        with pytest.raises(JobRejected) as refused:
            submit_job(ctx, _spec(url), tenant=TENANT)
        assert refused.value.field == "webhook.url" and "webhook URL refused" in str(refused.value)
    assert ctx.enqueuer.tasks == []


def test_cancelled_and_failed_jobs_send_their_end_too(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    cancelled = submit_job(ctx, _spec(receiver.url()), tenant=TENANT).id
    cancel_job(JobHandle.bind(ctx, cancelled))
    drain(ctx, only=STEPS)
    failed = submit_job(ctx, _spec(receiver.url()), tenant=TENANT).id
    fail_job(JobHandle.bind(ctx, failed), RuntimeError("the input cannot be read"))
    # a finalize run twice before the first attempt queues twice: one event, sent once (below)
    assert {task[1] for task in _webhook_tasks(ctx)} == {cancelled, failed}
    for job_id in (cancelled, failed):
        assert deliver_event(ctx, job_id, JOB_ENDED) is None
    types = {json.loads(r.body)["data"]["job_id"]: json.loads(r.body)["type"] for r in receiver.requests}
    assert types == {cancelled: "job.cancelled", failed: "job.failed"}
    assert all(request.verified for request in receiver.requests)


def test_another_steps_event_is_queued_once_per_key_with_its_own_id(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    _webhook_tasks(ctx)
    job = JobHandle.bind(ctx, job_id)
    first = send_job_event(job, "sink.load_ended", {"sink": "search-db", "state": "succeeded"}, key="search-db:1")
    again = send_job_event(job, "sink.load_ended", {"sink": "search-db", "state": "other"}, key="search-db:1")
    retry = send_job_event(job, "sink.load_ended", {"sink": "search-db", "state": "failed"}, key="search-db:2")
    assert first.event_id == again.event_id != retry.event_id
    tasks = _webhook_tasks(ctx)
    assert len(tasks) == 3 and len({task[2] for task in tasks}) == 2  # queued until attempted, same event
    deliver_event(ctx, job_id, tasks[0][2])
    [request] = receiver.requests
    assert json.loads(request.body)["data"]["state"] == "succeeded" and request.verified  # the first one's data
    with pytest.raises(ValueError, match="event type"):
        send_job_event(job, "Sink Ended", {})


def test_a_sink_loads_end_is_its_own_signed_event(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver, sinks={"search": f"memory://{tmp_path.name}"},
                   sink_grants={TENANT: ["search"]})
    spec = _spec(receiver.url()).model_copy(update={"sink": "search"})
    job_id = submit_job(ctx, spec, tenant=TENANT).id
    drain(ctx, only=STEPS | {"sink"})  # the finalizer queues the load; the load's end queues its event
    names = [task[2] for task in _webhook_tasks(ctx)]
    assert len(names) == 2 and names[0] == JOB_ENDED
    for name in names:
        assert deliver_event(ctx, job_id, name) is None
    events = [json.loads(request.body) for request in receiver.requests]
    assert [event["type"] for event in events] == ["job.succeeded", "sink.succeeded"]
    assert events[1]["data"]["name"] == "search" and events[1]["data"]["upserted"] == 6
    assert b"memory://" not in receiver.requests[1].body  # the sink's name, never its URL
    assert all(request.verified for request in receiver.requests)


def test_the_outcome_survives_a_lost_status_cache(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = _finished_job(ctx, receiver.url())
    deliver_event(ctx, job_id, JOB_ENDED)
    ctx.status = InMemoryJobStatusStore()  # Redis lost everything: the ledger has the truth
    recovered = recover_status(JobHandle.bind(ctx, job_id))
    assert recovered.webhook.state == "delivered" and recovered.webhook.attempts == 1
    records = WebhookRecords(ctx.store, JobHandle.bind(ctx, job_id).layout)
    assert records.event(JOB_ENDED).id == recovered.webhook.event_id


def test_an_in_process_run_records_that_it_delivers_no_webhooks(tmp_path, minilm_engine, receiver):
    ctx = local_context(tmp_path / "out", Settings(webhook_allow=f"http://127.0.0.1:{receiver.port}"))
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    job_id = submit_job(ctx, _spec(receiver.url())).id  # the inline runner runs it to the end
    webhook = current_status(JobHandle.bind(ctx, job_id)).webhook
    assert current_status(JobHandle.bind(ctx, job_id)).status.value == "succeeded"
    assert webhook.state == "failed" and "delivers no webhooks" in webhook.error and receiver.requests == []


def test_the_reconciler_sends_the_end_of_a_job_whose_finalizer_died_after_the_manifest(tmp_path, minilm_engine,
                                                                                       receiver):
    from poolq.jobs.steps import finalizer
    from poolq.worker.reconciler import reconcile

    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = submit_job(ctx, _spec(receiver.url()), tenant=TENANT).id
    drain(ctx, only=frozenset({"plan", "plan_section", "shard"}))
    job = JobHandle.bind(ctx, job_id)
    finalizer._write_manifest(job, finalizer._build_manifest(job))  # ... and the process died here
    ctx.enqueuer.take()
    assert WebhookRecords(ctx.store, job.layout).event(JOB_ENDED) is None

    reconcile(ctx)
    assert _webhook_tasks(ctx) == [("webhook", job_id, JOB_ENDED, 0, 0.0)]
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    assert json.loads(receiver.requests[0].body)["type"] == "job.succeeded" and receiver.requests[0].verified


def test_a_broker_that_refuses_the_delivery_task_leaves_the_job_ended_and_the_event_for_the_reconciler(
        tmp_path, minilm_engine, receiver):
    from poolq.products.webhooks.events import WebhookNotQueued
    from poolq.worker.reconciler import reconcile

    class BrokerDown(RecordingEnqueuer):
        def deliver_webhook(self, job_id, name, attempt=0, countdown_s=0.0):
            raise ConnectionError("the broker is down")

    ctx = _context(tmp_path, minilm_engine, receiver)
    recording = ctx.enqueuer
    ctx.enqueuer = BrokerDown()
    job_id = submit_job(ctx, _spec(receiver.url()), tenant=TENANT).id
    with pytest.raises(WebhookNotQueued):  # the finalize task fails: it is retried
        drain(ctx, only=STEPS)
    status = current_status(JobHandle.bind(ctx, job_id))
    assert status.status.value == "succeeded"  # ended, whatever happens to its webhook
    assert ctx.store.exists(ctx.service_layout.active(job_id))  # still active: the reconciler comes back to it

    ctx.enqueuer = recording  # the broker is back
    reconcile(ctx)
    assert _webhook_tasks(ctx) == [("webhook", job_id, JOB_ENDED, 0, 0.0)]
    assert not ctx.store.exists(ctx.service_layout.active(job_id))  # cleaned up now
    assert deliver_event(ctx, job_id, JOB_ENDED) is None and receiver.requests[0].verified

"""``job.running`` (opt-in: ``webhook.send_running``): once planned, a job's webhook gets its place
in fair share, the same fields and numbers ``GET /v1/jobs/{id}`` shows at that moment."""
from support.job_doubles import RecordingEnqueuer, drain

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.webhook_records import WebhookRecords
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.submit import submit_job
from poolq.products.webhooks.running_event import RUNNING
from poolq.worker.local_runner import local_context

TENANT = "acme"
URL = "http://127.0.0.1:9/hook"
PLANNING = frozenset({"plan", "plan_section"})  # shards stay recorded: nothing runs, nothing moves
MODEL = "all-MiniLM-L6-v2"


def _context(tmp_path):
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=2, webhook_allow="http://127.0.0.1:9"))
    ctx.enqueuer = RecordingEnqueuer()
    ctx.workers.heartbeat("w1", 60.0)
    ctx.throughput.record("w1", MODEL, "float32", tokens=1000, seconds=1.0)  # the fleet: 1,000 tokens/s
    return ctx


def _submit(ctx, send_running: bool = True, documents: int = 6) -> str:
    docs = [{"id": f"d{i}", "text": f"document number {i} about the place of a job in line"} for i in range(documents)]
    spec = JobSpec.model_validate({"input": {"documents": docs}, "webhook": {"url": URL, "send_running": send_running}})
    return submit_job(ctx, spec, tenant=TENANT).id


def _event_data(ctx, job_id: str) -> dict:
    """The ``data`` of the job's ``job.running`` in its ledger; {} when none was queued."""
    event = WebhookRecords(ctx.store, JobHandle.bind(ctx, job_id).layout).event(RUNNING)
    return {} if event is None else event.payload["data"]


def test_a_planned_job_sends_its_place_with_the_numbers_its_status_shows(tmp_path):
    ctx = _context(tmp_path)
    job_id = _submit(ctx)
    drain(ctx, only=PLANNING)
    assert [task[2] for task in ctx.enqueuer.tasks if task[0] == "webhook"] == [RUNNING]
    data, status = _event_data(ctx, job_id), current_status(JobHandle.bind(ctx, job_id))
    assert data["job_id"] == job_id and data["status"] == "running"
    assert data["queue"] == status.queue.model_dump(mode="json") and data["estimate"] == status.estimate.model_dump(mode="json")
    # alone on a fleet of 1,000 tokens/s: its estimated tokens (characters at 4 a token) over 1,000
    assert (data["queue"]["jobs_ahead"], data["queue"]["tenant_share"], data["queue"]["fleet_tokens_per_s"]) == (0, 1.0, 1000.0)
    assert data["queue"]["eta_s"] == round(status.estimate.tokens / 1000, 1) > 0


def test_a_later_job_of_the_tenant_sends_the_job_ahead_of_it_once(tmp_path):
    ctx = _context(tmp_path)
    first = _submit(ctx)
    drain(ctx, only=PLANNING)
    second = _submit(ctx, documents=4)
    drain(ctx, only=PLANNING)
    data = _event_data(ctx, second)
    assert data["queue"] == current_status(JobHandle.bind(ctx, second)).queue.model_dump(mode="json")
    assert data["queue"]["jobs_ahead"] == 1 and data["queue"]["eta_s"] is not None
    assert _event_data(ctx, first)["queue"]["jobs_ahead"] == 0
    ctx.enqueuer.tasks.append(("plan", second))  # a redelivered plan task queues the same event, not a new one
    drain(ctx, only=PLANNING)
    running = {(task[1], task[2]) for task in ctx.enqueuer.tasks if task[0] == "webhook"}
    assert running == {(first, RUNNING), (second, RUNNING)} and _event_data(ctx, second) == data


def test_no_running_event_unless_the_webhook_asks_for_it(tmp_path):
    ctx = _context(tmp_path)
    job_id = _submit(ctx, send_running=False)
    drain(ctx, only=PLANNING)
    assert _event_data(ctx, job_id) == {} and not [task for task in ctx.enqueuer.tasks if task[0] == "webhook"]

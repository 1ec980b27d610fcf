"""Webhook deliveries go to a queue of their own, which `poolq worker` consumes with a worker of its own
(a pool of threads) beside the control worker: no delivery is sent where planning and finalizing run."""
import pytest

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE, CeleryEnqueuer
from poolq.jobs.settings import Settings
from poolq.worker.fleet import worker_set
from poolq.worker.fleet.worker_set import WorkerOptions, run_worker_set


class SentTasks:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list, str, float | None]] = []

    def send_task(self, name, args, queue, countdown=None):
        self.sent.append((name, args, queue, countdown))


def test_every_delivery_and_its_retries_go_to_the_webhooks_queue_never_to_control():
    app = SentTasks()
    enqueuer = CeleryEnqueuer(app)
    enqueuer.deliver_webhook("job-1", "job-ended")
    enqueuer.deliver_webhook("job-1", "job-ended", 3, 40.0)
    enqueuer.finalize("job-1")
    assert [(args, queue, countdown) for _, args, queue, countdown in app.sent] == [
        (["job-1", "job-ended", 0], WEBHOOK_QUEUE, None), (["job-1", "job-ended", 3], WEBHOOK_QUEUE, 40.0),
        (["job-1"], CONTROL_QUEUE, None)]
    assert WEBHOOK_QUEUE not in (CONTROL_QUEUE, GPU_QUEUE)


@pytest.fixture
def started(monkeypatch):
    """The commands a worker set would start (nothing is started, the store is not asked)."""
    seen: list = []

    class Supervisor:
        def __init__(self, commands, policy) -> None:
            seen.extend(commands)

        def install_signal_handlers(self) -> None:
            pass

        def run(self) -> int:
            return 0

    monkeypatch.setattr(worker_set, "WorkerSupervisor", Supervisor)
    monkeypatch.setattr(worker_set, "check_store", lambda settings: None)
    return seen


def _queues(argv: list[str]) -> str:
    return argv[argv.index("--queues") + 1]


def test_poolq_worker_starts_a_webhook_worker_on_threads_beside_the_control_worker(started):
    settings = Settings(control_concurrency=2, webhook_concurrency=6)
    options = WorkerOptions(concurrency=1, queues=(GPU_QUEUE,), max_tasks_per_child=100)
    assert run_worker_set(settings, options) == 0
    assert {command.name: _queues(command.argv) for command in started} == {
        "control": CONTROL_QUEUE, "webhooks": WEBHOOK_QUEUE, "compute": GPU_QUEUE}
    [webhooks] = [command for command in started if command.name == "webhooks"]
    assert webhooks.argv[webhooks.argv.index("--concurrency") + 1] == "6"
    assert "--max-tasks-per-child" not in webhooks.argv  # threads: no children to replace
    # the process it starts runs its deliveries on threads; every other worker on processes
    assert WorkerOptions(queues=(WEBHOOK_QUEUE,)).pool == "threads"
    for queues in ((CONTROL_QUEUE,), (GPU_QUEUE,), (CONTROL_QUEUE, WEBHOOK_QUEUE)):
        assert WorkerOptions(queues=queues).pool == "prefork", queues


def test_workers_per_gpu_without_a_control_worker_start_no_webhook_worker_either(started):
    run_worker_set(Settings(), WorkerOptions(queues=(GPU_QUEUE,)), control=False)
    assert [command.name for command in started] == ["compute"]

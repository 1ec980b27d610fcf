"""The worker set ``poolq worker`` supervises: a store without conditional writes is refused before
anything starts; a control worker and a compute worker, or one compute worker per GPU (--gpus)."""

import pytest
from click.testing import CliRunner

from poolq.api.cli.main import main
from poolq.jobs.settings import Settings, StoreSettings
from poolq.storage import ConditionalWritesUnsupported, LocalObjectStore
from poolq.worker import worker_startup
from poolq.worker.fleet import worker_set
from poolq.worker.fleet.worker_set import WorkerOptions, check_store, compute_worker_commands, control_worker_command


class IgnoresIfAbsent(LocalObjectStore):
    """A store that accepts ``if_absent`` and then overwrites anyway (like a server ignoring If-None-Match)."""

    def put(self, key, data, *, if_absent=False):
        super().put(key, data)


@pytest.fixture
def store_without_conditional_writes(tmp_path, monkeypatch) -> IgnoresIfAbsent:
    """Every Settings in this test serves the local store at tmp_path, through IgnoresIfAbsent."""
    store = IgnoresIfAbsent(tmp_path / "store")
    monkeypatch.setenv("POOLQ_STORE", "local")
    monkeypatch.setenv("POOLQ_LOCAL_STORE_ROOT", str(tmp_path / "store"))
    monkeypatch.setattr(StoreSettings, "object_store", lambda self: store)
    return store


def test_check_store_refuses_a_store_that_ignores_if_absent(store_without_conditional_writes):
    with pytest.raises(ConditionalWritesUnsupported, match="conditional"):
        check_store(Settings())
    assert list(store_without_conditional_writes.list("")) == []  # the probe cleaned up after itself


def test_check_store_can_be_switched_off(store_without_conditional_writes):
    check_store(Settings(require_conditional_writes=False))


@pytest.mark.parametrize("prefix", ["jobs", "deploy/jobs", ""])
def test_check_store_passes_on_the_local_store(tmp_path, prefix):
    settings = Settings(store="local", local_store_root=tmp_path / "store", output_prefix=prefix)
    check_store(settings)
    assert list(settings.storage.object_store().list("")) == []


@pytest.mark.integration
def test_check_store_passes_on_real_s3(new_buckets):
    bucket = new_buckets.bucket("probe")
    config = new_buckets.config
    settings = Settings(
        store="s3", bucket=bucket, s3_endpoint_url=config.endpoint_url,
        s3_access_key_id=config.access_key_id, s3_secret_access_key=config.secret_access_key,
    )
    check_store(settings)
    assert list(settings.storage.object_store().list("")) == []


@pytest.fixture
def no_worker_starts(monkeypatch):
    """If the check wrongly passed, fail here instead of starting Celery or child processes."""

    def started(*args, **kwargs):
        raise AssertionError("a worker was started against a store without conditional writes")

    monkeypatch.setattr(worker_startup, "create_celery_app", started)
    monkeypatch.setattr(worker_set, "WorkerSupervisor", started)


@pytest.mark.parametrize("args", [["worker"], ["worker", "--gpus", "0,1"]], ids=["one", "per-gpu"])
def test_the_worker_command_exits_3_with_a_clear_message(store_without_conditional_writes, no_worker_starts, args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    assert "error:" in result.output and "conditional" in result.output and "If-None-Match" in result.output


def test_gpu_workers_get_one_gpu_each_and_concurrency_1(monkeypatch):
    options = WorkerOptions(concurrency=8, loglevel="DEBUG", queues=("gpu",), max_tasks_per_child=50)
    commands = compute_worker_commands(options, ["0", "1"], executable="/venv/bin/python", environ={"PATH": "/bin"})
    assert [command.env for command in commands] == [
        {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": gpu, "POOLQ_DEVICE": "cuda"} for gpu in ("0", "1")]
    hostnames = set()
    for argv in (command.argv for command in commands):
        assert argv[:4] == ["/venv/bin/python", "-m", "poolq.api", "worker"]
        assert argv[argv.index("--concurrency") + 1] == "1"
        assert "--gpus" not in argv  # a child is one plain worker
        hostnames.add(argv[argv.index("--hostname") + 1])
    assert len(hostnames) == 2
    # And each child's command line means what it says to `poolq worker`
    seen = []
    monkeypatch.setattr("poolq.worker.run_worker", lambda settings, opts: seen.append(opts))  # what the CLI imports
    for command in commands:
        result = CliRunner().invoke(main, command.argv[3:])
        assert result.exit_code == 0, result.output
    assert [(o.concurrency, o.queues, o.max_tasks_per_child, o.loglevel) for o in seen] == [(1, ("gpu",), 50, "DEBUG")] * 2


def test_the_worker_set_is_a_control_worker_that_loads_no_model_and_a_compute_worker():
    options = WorkerOptions(concurrency=2, loglevel="INFO", queues=("gpu",))
    control = control_worker_command(options, control_concurrency=3, executable="py", environ={})
    (compute,) = compute_worker_commands(options, executable="py", environ={})
    assert control.argv[control.argv.index("--queues") + 1] == "control"
    assert control.argv[control.argv.index("--concurrency") + 1] == "3"
    assert compute.argv[compute.argv.index("--queues") + 1] == "gpu"
    assert compute.argv[compute.argv.index("--concurrency") + 1] == "2"
    assert not WorkerOptions(queues=("control",)).computes and WorkerOptions(queues=("gpu",)).computes


def test_the_supervisor_of_a_worker_set_imports_no_celery_and_no_job_steps():
    # The supervisor only checks the store and starts processes (worker_set.py); a fresh process shows
    # what the CLI's `from poolq.worker import ... run_worker_set` pulls in
    import subprocess
    import sys

    code = ("import sys; from poolq.jobs import GPU_QUEUE, Settings; from poolq.worker import WorkerOptions, run_worker_set; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'celery' or m.startswith('poolq.jobs.steps')"
            " or m == 'poolq.worker.celery_tasks'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout

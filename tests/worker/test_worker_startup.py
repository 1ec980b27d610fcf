"""One worker process: Celery stopping it on an unrecoverable error is a non-zero exit; a control
worker never loads a model."""

import pytest

from poolq.jobs.settings import Settings

# A worker whose consumer cannot start: the bootstep fails the way kombu's did on a closed
# channel after a Redis outage (worker/broker_transport.py), as an "unrecoverable error".
_BROKEN_WORKER = """
import sys
from celery import bootsteps
from poolq.jobs.settings import Settings
from poolq.worker import worker_startup
from poolq.products.job_hooks import ProductHooks


class Broken(bootsteps.StartStopStep):
    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, consumer):
        raise AttributeError("'NoneType' object has no attribute 'client'")


register_tasks = worker_startup.register_tasks


def register_and_break(app, settings, **options):
    context = register_tasks(app, settings, **options)
    app.steps["consumer"].add(Broken)
    return context


worker_startup.register_tasks = register_and_break
sys.exit(worker_startup.run_worker(Settings()))
"""


@pytest.mark.integration
def test_a_worker_that_celery_stopped_on_an_unrecoverable_error_exits_non_zero(redis_url, tmp_path):
    # Given a real worker process whose consumer fails when it starts
    import os
    import subprocess
    import sys

    env = {**os.environ, "POOLQ_REDIS_URL": redis_url, "POOLQ_STORE": "local",
           "POOLQ_LOCAL_STORE_ROOT": str(tmp_path / "store")}
    # When it runs
    done = subprocess.run([sys.executable, "-c", _BROKEN_WORKER], env=env, capture_output=True, text=True, timeout=120)
    # Then Celery stops it and it exits 1, so a supervisor (or a service manager that restarts on
    # failure) starts it again; before, Celery's app.start dropped the code and it exited 0
    output = done.stdout + done.stderr
    assert "Unrecoverable error" in output, output[-3000:]
    assert done.returncode == 1, output[-3000:]


def test_a_control_worker_refuses_to_load_a_model(tmp_path):
    from support.job_doubles import RecordingEnqueuer

    from poolq.jobs.context import build_context
    from poolq.jobs.engine_pool import ModelsNotServedHere
    from poolq.products.job_hooks import ProductHooks

    settings = Settings(store="local", local_store_root=tmp_path)
    ctx = build_context(settings, RecordingEnqueuer(), hooks=ProductHooks(), loads_models=False)
    with pytest.raises(ModelsNotServedHere, match="control worker"):
        ctx.engines.get("all-MiniLM-L6-v2")
    assert ctx.engines.identity("all-MiniLM-L6-v2")  # naming a model's files needs no model loaded

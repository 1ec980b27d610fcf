"""Starting a Celery worker process for poolq."""
from __future__ import annotations

from .celery_app import create_celery_app
from .settings import Settings
from .tasks import register_tasks


def run_worker(settings: Settings, *, concurrency: int = 1, loglevel: str = "INFO", hostname: str | None = None) -> None:
    """Run a prefork worker consuming the control and gpu queues until it is told to stop."""
    app = create_celery_app(settings)
    register_tasks(app, settings)
    argv = [
        "worker",
        f"--loglevel={loglevel}",
        "--pool=prefork",
        f"--concurrency={concurrency}",
        f"--queues={','.join(app.conf.poolq_queues)}",
        "--without-gossip",
        "--without-mingle",
    ]
    if hostname:
        argv.append(f"--hostname={hostname}")
    app.worker_main(argv=argv)

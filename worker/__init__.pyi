# The worker package's public face (loaded lazily, as poolq.jobs' is).
from .beat.beat_process import (
    run_beat as run_beat,
)
from .celery_app import (
    create_celery_app as create_celery_app,
)
from .fleet.worker_set import (
    WorkerOptions as WorkerOptions,
)
from .fleet.worker_set import (
    run_worker_set as run_worker_set,
)
from .local_runner import (
    local_context as local_context,
)
from .local_runner import (
    run_job_locally as run_job_locally,
)
from .worker_startup import (
    run_worker as run_worker,
)

# The products package's public face (loaded lazily, as poolq.jobs' is).
from .batches.batch_files import (
    FileNotFound as FileNotFound,
)
from .batches.batch_files import (
    FileTooLarge as FileTooLarge,
)
from .batches.batch_files import (
    create_file as create_file,
)
from .batches.batch_files import (
    delete_file as delete_file,
)
from .batches.batch_files import (
    get_file as get_file,
)
from .batches.batch_files import (
    list_files as list_files,
)
from .batches.batch_files import (
    open_file_content as open_file_content,
)
from .batches.batches import (
    BatchAlreadyEnded as BatchAlreadyEnded,
)
from .batches.batches import (
    BatchNotFound as BatchNotFound,
)
from .batches.batches import (
    BatchRejected as BatchRejected,
)
from .batches.batches import (
    cancel_batch as cancel_batch,
)
from .batches.batches import (
    create_batch as create_batch,
)
from .batches.batches import (
    get_batch as get_batch,
)
from .batches.batches import (
    list_batches as list_batches,
)
from .batches.openai_objects import (
    BatchObject as BatchObject,
)
from .batches.openai_objects import (
    DeletedFile as DeletedFile,
)
from .batches.openai_objects import (
    ExpiresAfter as ExpiresAfter,
)
from .batches.openai_objects import (
    FileObject as FileObject,
)
from .batches.openai_objects import (
    Page as Page,
)
from .schedules.schedule import (
    Schedule as Schedule,
)
from .schedules.schedule import (
    ScheduleRequest as ScheduleRequest,
)
from .schedules.schedule_admin import (
    create_schedule as create_schedule,
)
from .schedules.schedule_admin import (
    delete_schedule as delete_schedule,
)
from .schedules.schedule_admin import (
    get_schedule as get_schedule,
)
from .schedules.schedule_admin import (
    list_schedules as list_schedules,
)
from .schedules.schedule_runner import (
    RunView as RunView,
)
from .schedules.schedule_runner import (
    recent_runs as recent_runs,
)
from .schedules.schedule_runner import (
    run_schedule as run_schedule,
)
from .schedules.schedule_runner import (
    run_view as run_view,
)
from .sinks.sink_entries import (
    retry_sinks as retry_sinks,
)
from .webhooks.webhook_secrets import (
    WebhookSecretStore as WebhookSecretStore,
)

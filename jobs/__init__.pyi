# The job layer's public face: the names the edges (HTTP server, CLI, dev tools) use, each from
# the module that defines it (``X as X``: a stub's way to say a name is exported). Loaded lazily
# (jobs/__init__.py): importing one name imports its module only, so a CLI verb or a light
# script never pays for the worker's imports.
from .batches.batch_files import (
    FileNotFound as FileNotFound,
    FileTooLarge as FileTooLarge,
    create_file as create_file,
    delete_file as delete_file,
    get_file as get_file,
    list_files as list_files,
    open_file_content as open_file_content,
)
from .batches.batches import (
    BatchAlreadyEnded as BatchAlreadyEnded,
    BatchNotFound as BatchNotFound,
    BatchRejected as BatchRejected,
    cancel_batch as cancel_batch,
    create_batch as create_batch,
    get_batch as get_batch,
    list_batches as list_batches,
)
from .batches.openai_objects import (
    BatchObject as BatchObject,
    DeletedFile as DeletedFile,
    ExpiresAfter as ExpiresAfter,
    FileObject as FileObject,
    Page as Page,
)
from .context import (
    JobContext as JobContext,
    build_context as build_context,
)
from .coordination.enqueuer import (
    CONTROL_QUEUE as CONTROL_QUEUE,
    GPU_QUEUE as GPU_QUEUE,
    CeleryEnqueuer as CeleryEnqueuer,
)
from .job_handle import (
    JobHandle as JobHandle,
)
from .lane.embedding_lane import (
    EmbeddingLane as EmbeddingLane,
    LaneTimeout as LaneTimeout,
)
from .lane.lane_messages import (
    EmbeddingReply as EmbeddingReply,
    EmbeddingRequest as EmbeddingRequest,
    InputError as InputError,
    LaneInput as LaneInput,
    estimated_tokens as estimated_tokens,
)
from .lane.memory_lane import (
    InMemoryEmbeddingLane as InMemoryEmbeddingLane,
)
from .lane.redis_lane import (
    RedisEmbeddingLane as RedisEmbeddingLane,
)
from .ledger.manifest import (
    JobManifest as JobManifest,
    ManifestCounts as ManifestCounts,
    ManifestSink as ManifestSink,
    ManifestErrors as ManifestErrors,
    ManifestPart as ManifestPart,
    ManifestUsage as ManifestUsage,
    OutputEncoding as OutputEncoding,
)
from .local_runner import (
    local_context as local_context,
    run_job_locally as run_job_locally,
)
from .model.job_ids import (
    JobNotFound as JobNotFound,
)
from .model.job_spec import (
    JobSpec as JobSpec,
    JobTaskName as JobTaskName,
    LongDocuments as LongDocuments,
    ReuseMode as ReuseMode,
)
from .model.job_state import (
    JobState as JobState,
)
from .model.job_status import (
    JobStatus as JobStatus,
)
from .observability.gauges import (
    SystemGauges as SystemGauges,
    gauges_for as gauges_for,
)
from .observability.job_metrics import (
    LATENCY_BUCKETS_S as LATENCY_BUCKETS_S,
    JobMetrics as JobMetrics,
    MetricsTotals as MetricsTotals,
)
from .observability.log_format import (
    configure_logging as configure_logging,
)
from .schedules.schedule import (
    Schedule as Schedule,
    ScheduleRequest as ScheduleRequest,
)
from .schedules.schedule_admin import (
    create_schedule as create_schedule,
    delete_schedule as delete_schedule,
    get_schedule as get_schedule,
    list_schedules as list_schedules,
)
from .schedules.schedule_runner import (
    RunView as RunView,
    recent_runs as recent_runs,
    run_schedule as run_schedule,
    run_view as run_view,
)
from .settings import (
    Settings as Settings,
)
from .sinks.sink_entries import (
    retry_sinks as retry_sinks,
)
from .status.job_listing import (
    list_jobs as list_jobs,
)
from .status.recovery import (
    current_status as current_status,
)
from .steps.cancel import (
    JobAlreadyFinished as JobAlreadyFinished,
    cancel_job as cancel_job,
)
from .steps.failures import (
    RETRYABLE_ERRORS as RETRYABLE_ERRORS,
    describe as describe,
    is_retryable as is_retryable,
)
from .steps.submit import (
    IdempotencyConflict as IdempotencyConflict,
    JobRejected as JobRejected,
    TooManyActiveJobs as TooManyActiveJobs,
    check_active_cap as check_active_cap,
    check_job as check_job,
    submit_job as submit_job,
    validate_spec as validate_spec,
)
from .reuse.reuse_scope import tenant_reuse_store as tenant_reuse_store
from .tasks import JOB_TASKS as JOB_TASKS
from .tenancy.api_keys import (
    ApiKeyStore as ApiKeyStore,
    InvalidTenant as InvalidTenant,
    Principal as Principal,
    validate_tenant as validate_tenant,
)
from .tenancy.key_signature import (
    KeySigner as KeySigner,
    SigningSecretMissing as SigningSecretMissing,
)
from .tenancy.uploads import (
    create_upload as create_upload,
)
from .worker.beat import (
    run_beat as run_beat,
)
from .worker.celery_app import (
    create_celery_app as create_celery_app,
)
from .worker.worker_set import (
    WorkerOptions as WorkerOptions,
    run_worker_set as run_worker_set,
)
from .worker.worker_startup import (
    run_worker as run_worker,
)
from .webhooks.webhook_secrets import (
    WebhookSecretStore as WebhookSecretStore,
)

# The job layer's public face: the names the edges (HTTP server, CLI, dev tools) use, each from
# the module that defines it (``X as X``: a stub's way to say a name is exported). Loaded lazily
# (jobs/__init__.py): importing one name imports its module only, so a CLI verb or a light
# script never pays for the worker's imports.
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
from .spec.job_ids import (
    JobNotFound as JobNotFound,
)
from .spec.job_spec import (
    JobSpec as JobSpec,
    JobTaskName as JobTaskName,
    LongDocuments as LongDocuments,
    ReuseMode as ReuseMode,
)
from .spec.job_state import (
    JobState as JobState,
)
from .spec.job_status import (
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
from .settings import (
    Settings as Settings,
)
from .status.job_listing import (
    list_jobs as list_jobs,
)
from .status.current_status import (
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

"""The one Settings object of the service's edges (API, workers, CLI). Read from POOLQ_* env."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import redis
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from poolq.engine import DEFAULT_MODEL, EngineConfig
from poolq.engine.hardware import resolve_dtype_before_fork
from poolq.jobs.sink_settings import SinkConfig
from poolq.storage import LocalObjectStore, ObjectStore, S3Config, S3ObjectStore, make_s3_client

# Whose calls a client makes: the API's (a request waits on them: short deadlines) or a worker's,
# beat's or the CLI's (long parts stream through them: longer deadlines).
Role = Literal["api", "worker"]


class Settings(BaseSettings):
    """Service configuration. Every process of one deployment must load the same values."""

    model_config = SettingsConfigDict(env_prefix="POOLQ_", extra="ignore")

    redis_url: str = "redis://127.0.0.1:6379/0"
    # Where job inputs, shards and results live: an S3 bucket, or a local directory.
    store: Literal["s3", "local"] = "s3"
    bucket: str = "poolq"
    local_store_root: Path = Path(".poolq/store")
    output_prefix: str = "jobs"
    s3_endpoint_url: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    s3_region: str = "us-east-1"
    s3_multipart_threshold_bytes: int = Field(64 << 20, ge=5 << 20)
    s3_max_attempts: int = Field(5, ge=0, description="botocore's retries.max_attempts: retries of an S3 request")
    presign_expires_s: int = Field(900, ge=1, le=900)

    # Deadlines of every call to a dependency (README, "Deadlines"). A stalled store or Redis is an
    # error after these, classified retryable (jobs/steps/failures.py): on the API's request path a
    # 503 with Retry-After within ~5 s; in a worker a retry, as for an outage.
    s3_connect_timeout_s: float = Field(2.0, gt=0, description="connecting to the object store")
    s3_api_read_timeout_s: float = Field(2.0, gt=0, description="the API waits this long for the store's next bytes")
    s3_api_max_attempts: int = Field(1, ge=0, description="retries of an S3 request on the API's request path")
    s3_worker_read_timeout_s: float = Field(30.0, gt=0, description="workers (and beat, the CLI) wait this long for "
                                            "the store's next bytes; their retries: s3_max_attempts")
    redis_connect_timeout_s: float = Field(2.0, gt=0, description="connecting to Redis (and the broker)")
    redis_api_timeout_s: float = Field(2.0, gt=0, description="the API waits this long for a Redis answer")
    redis_worker_timeout_s: float = Field(10.0, gt=0, description="workers and beat wait this long for a Redis answer")
    redis_retries: int = Field(1, ge=0, description="retries of a Redis command that lost its connection (in workers "
                               "and beat also of one that timed out; the API answers 503 at the first deadline)")
    redis_health_check_interval_s: int = Field(30, ge=0, description="workers and beat check (PING) a connection idle "
                                               "this long before using it again; the API does not: on a stalled Redis "
                                               "the check and its retries come on top of the command's")

    # Behind a load balancer (README): X-Forwarded-For is read only from these peers; empty, never.
    trusted_proxies: str = Field("", description="comma-separated addresses or CIDR networks of the proxies in front "
                                 "of the API; the client address (failed-authentication limit) is then the rightmost "
                                 "X-Forwarded-For hop that is not one of them")

    def redis_timeout_s(self, role: Role = "worker") -> float:
        return self.redis_api_timeout_s if role == "api" else self.redis_worker_timeout_s

    def redis_health_check_interval(self, role: Role = "worker") -> int:
        return 0 if role == "api" else self.redis_health_check_interval_s

    def redis_options(self, role: Role = "worker") -> dict:
        """redis-py's connection options for ``role``: deadlines, bounded retries, health checks."""
        return {
            "socket_connect_timeout": self.redis_connect_timeout_s,
            "socket_timeout": self.redis_timeout_s(role),
            "health_check_interval": self.redis_health_check_interval(role),
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.1), self.redis_retries, supported_errors=(
                (redis.exceptions.ConnectionError,) if role == "api" else
                (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError))),
        }

    def redis_client(self, role: Role = "worker") -> redis.Redis:
        """A client of ``redis_url`` whose every command has a deadline (``redis_options``)."""
        return redis.Redis.from_url(self.redis_url, **self.redis_options(role))

    default_model: str = DEFAULT_MODEL
    models: dict[str, str] = Field(default_factory=dict, description="extra model name -> local directory")
    models_allow: str = Field("", description="POOLQ_MODELS_ALLOW: comma-separated glob patterns of Hugging Face Hub "
                              "ids this server may download and serve (BAAI/*,intfloat/e5-*); empty: none, only the "
                              "packaged models and POOLQ_MODELS entries (docs/models.md)")
    warm_default_model: bool = Field(True, description="compute workers load default_model as they start, not in "
                                     "their first shard or interactive request")
    warm_models: str = Field("", description="POOLQ_WARM_MODELS: comma-separated models each compute worker loads "
                             "and runs once as it starts (empty: default_model); warm_default_model=false: none")
    worker_model_memory: int | None = Field(None, ge=1, description="POOLQ_WORKER_MODEL_MEMORY: bytes of model weights "
                                            "a worker process keeps loaded; a load past it first unloads the least "
                                            "recently used idle models (unset: no bound)")
    device: str = "cpu"
    # auto: bfloat16 on Ampere+ GPUs and on CPUs with AMX or AVX-512-BF16, float16 on older GPUs, float32 on
    # other CPUs (engine/hardware.py);
    # int8 (CPU): the encoder's GEMMs in int8 where that keeps cosine >= 0.99 to float32, else refused
    # POOLQ_COMPUTE_DTYPE (POOLQ_DTYPE, its first name, still works)
    dtype: Literal["float32", "float16", "bfloat16", "int8", "auto"] = Field(
        "auto", validation_alias=AliasChoices("POOLQ_COMPUTE_DTYPE", "POOLQ_DTYPE", "dtype"))
    # The engine's step: progress, cancel and the interactive lane's turn come between two steps, so
    # a step stays about a second of work. On a 2-core CPU, MiniLM does ~2,000 tokens/s, and a
    # smaller batch costs it no throughput (its GEMMs are long enough either way).
    max_num_batched_tokens: int | None = Field(None, ge=64, description="tokens per engine step; unset: 8192 on a "
                                               "GPU, 2048 on a CPU")
    max_num_seqs: int = Field(128, ge=1)
    max_chunks_per_document: int = Field(10_000, ge=1, description="chunk modes: a document making more chunk rows "
                                         "is a per-record error (too_many_chunks)")

    # Fair share (jobs/coordination/fair_share.py): as many shard tasks are out at once as compute
    # workers are alive, so a new job's shards are next in line, not behind a backlog of another's.
    dispatch_window: int = Field(8, ge=1, description="shard tasks out at once, over every job, while no compute "
                                 "worker has said it is alive (in-process runs; a queue waiting for its first worker)")
    shards_per_worker: int = Field(1, ge=1, description="shard tasks out at once per live compute worker (more "
                                   "queue work behind a running shard)")
    control_concurrency: int = Field(2, ge=1, description="pool processes of the control worker (planning, "
                                     "finalizing, the reconciler) that `poolq worker` starts beside the compute one")
    worker_heartbeat_s: float = Field(5.0, gt=0, description="how often a compute worker says it is alive; it "
                                      "counts as gone after three missed beats")
    finished_job_ttl_s: float = Field(7 * 86400.0, gt=0, description="Redis state of a finished job expires after "
                                      "this; its status is then read back from the ledger")
    # A shard is about shard_work_s of one worker's time: its tokens, estimated from characters
    # (CHARS_PER_TOKEN) before anything is tokenized, stay under shard_work_s * shard_tokens_per_s.
    # Unset, the throughput is what a worker of ``device`` does with a MiniLM-sized model: ~50k
    # tokens/s on a GPU (an estimate until infra/gpu/check.sh has run), ~2k on a 2-core CPU
    # (devtools/bench/scale/ measured 2,100). The document and character caps bound a shard's memory.
    # ~10 s: a worker turns to another job's shard at least that often (fair share, a small job's
    # wait); shorter shards cost more descriptors and commits (docs/scheduling.md measures it).
    shard_work_s: float = Field(10.0, gt=0, description="seconds of one worker's work per shard")
    shard_tokens_per_s: float | None = Field(None, gt=0, description="a worker's embedding throughput, for sizing "
                                             "shards (default: by device)")
    shard_max_documents: int = Field(20_000, ge=1)
    plan_section_bytes: int = Field(64 << 20, ge=1 << 10, description="planning reads the input in sections of about "
                                    "this many bytes, each by its own task (large objects are cut at line ends)")
    plan_partition_bytes: int = Field(16 << 20, ge=1 << 16, description="planning decides duplicate ids and unchanged "
                                      "documents in partitions of about this much input each (its memory bound)")
    shard_max_chars: int = Field(16_000_000, ge=1)
    max_inline_documents: int = Field(1000, ge=1)
    # Dry-run estimates (products/estimate/): a streaming pass over the input, a bounded sample tokenized.
    estimate_sample_per_stratum: int = Field(256, ge=1, description="estimates tokenize at most this many documents "
                                             "of each character-length bucket (a reservoir sample of it)")
    estimate_sample_chars: int = Field(16_000_000, ge=1000, description="characters an estimate's sample holds at most "
                                       "(all buckets together): its memory bound")
    estimate_max_seconds: float = Field(60.0, gt=0, description="an estimate reads the input this long at most; past "
                                        "it, what was read is extrapolated by bytes (the answer says how much)")
    estimate_concurrency: int = Field(2, ge=1, description="estimates computed at once by one API process (more wait)")

    # Reliability: leases, the reconciler, poison shards, cooperative cancel.
    lease_ttl_s: float = Field(60.0, gt=0, description="a unit's lease lapses this long after its last renewal")
    reconcile_interval_s: float = Field(30.0, gt=0)
    requeue_after_s: float = Field(600.0, gt=0, description="re-send an unleased unit's task after this long")
    max_shard_crashes: int = Field(3, ge=1, description="a shard that crashed its worker this often fails")
    cancel_check_interval_s: float = Field(1.0, gt=0)
    progress_interval_s: float = Field(1.0, gt=0, description="a running shard reports the documents and tokens it "
                                       "has done at most this often (progress between commits)")
    stale_upload_s: float = Field(3600.0, gt=0, description="abort multipart uploads older than this")
    # A step that failed with a retryable error is retried after base * 2**retry seconds (capped), jittered.
    task_retry_backoff_s: float = Field(1.0, gt=0)
    task_retry_backoff_max_s: float = Field(60.0, gt=0)
    require_conditional_writes: bool = True

    # Tenancy, authentication and limits (the API's edge).
    api_key_cache_s: float = Field(5.0, ge=0, description="how long a key lookup (or revocation) is cached")
    # Operator secrets, never stored in the bucket (docs/reliability.md, "Threat model").
    key_signing_secret: SecretStr | None = Field(None, description="HMAC-SHA256 secret that signs API key records "
                                                 "(32+ characters): the API and `poolq keys` refuse to run without it")
    flower_basic_auth: SecretStr | None = Field(None, description="user:password (comma-separated pairs) that "
                                                "`poolq flower` asks for; it refuses to start without it")
    max_request_bytes: int = Field(10 << 20, ge=1024, description="request bodies above this are refused (413)")
    max_document_chars: int = Field(2_000_000, ge=1, description="longest text accepted, inline or in an uploaded "
                                    "input (whose records are also bounded in bytes while read: docs/inputs-and-outputs.md)")
    max_input_compression_ratio: int = Field(100, ge=2, description="a gzip input expanding past this many times its "
                                             "compressed bytes (once past 256 MiB) stops being read: a decompression bomb")
    rate_limit_per_s: float = Field(20.0, gt=0, description="requests per second per tenant, sustained")
    rate_limit_burst: int = Field(60, ge=1)
    # Failed authentications per client address: guessing keys stops at the burst, then this rate.
    auth_failure_rate_per_s: float = Field(0.2, gt=0, description="invalid-key attempts per second per client address")
    auth_failure_burst: int = Field(20, ge=1)
    max_active_jobs_per_tenant: int = Field(20, ge=1)
    # Budgets (docs/budgets.md): tokens the model runs for a tenant, by job and by UTC day (reuse costs none).
    tenant_max_tokens_per_job: int | None = Field(None, ge=1, description="a job's limits.max_tokens when it sets "
                                                  "none, and the most one may set (more: 422); unset: no limit")
    tenant_max_tokens_per_day: int | None = Field(None, ge=1, description="tokens a tenant's jobs may run in one UTC "
                                                  "day; once reached, submissions get 429 with Retry-After until "
                                                  "midnight UTC; unset: no limit")
    budget_estimate_margin: float = Field(0.1, ge=0, lt=1, description="an input too large to price whole is refused "
                                          "at submit only when its estimate, less this share, still exceeds "
                                          "limits.max_tokens (the running job stops at the limit either way)")
    # tenant -> extra s3://bucket/prefix/ its jobs may read (its own uploads area is always allowed)
    tenant_input_prefixes: dict[str, list[str]] = Field(default_factory=dict)
    # Sinks (docs/sinks/): name -> store URL (or {"url": ..., "table": ...}); credentials stay here, jobs name them.
    sinks: dict[str, SinkConfig] = Field(default_factory=dict)
    # tenant -> sink names its jobs and schedules may load into (none unless granted)
    sink_grants: dict[str, list[str]] = Field(default_factory=dict)
    # file:// inputs: only for in-process runs on one's own machine (`poolq embed`), never the API.
    allow_file_inputs: bool = False
    upload_expires_s: int = Field(900, ge=60, le=3600)
    max_file_bytes: int = Field(512 << 20, ge=1024, description="POST /v1/files (OpenAI batch inputs): larger "
                                "uploads are refused (413) as soon as they pass it")

    # The interactive lane (POST /v1/embeddings, docs/embeddings.md): a request is answered by a
    # compute worker between two steps of its batch work, or refused with 503 after the timeout.
    embeddings_timeout_s: float = Field(20.0, gt=0, description="how long the API waits for a compute worker's "
                                        "answer; past it the request is dropped and the caller gets 503")
    embeddings_max_inputs: int = Field(2048, ge=1, description="inputs per request (OpenAI's limit); more: 413")
    embeddings_max_request_tokens: int | None = Field(
        None, ge=1, description="estimated tokens (characters / 4, or token ids) per request; more: 413 (one input "
        "over it alone: 422). Default: what a worker embeds in a quarter of embeddings_timeout_s")
    embeddings_max_waiting: int = Field(64, ge=1, description="requests one API process waits on at once (each "
                                        "holds a thread); more: 503 at once")

    # Operations: GET /metrics without a key (aggregates only, no tenant data) or only with an admin key.
    metrics_public: bool = True
    log_format: Literal["json", "text"] = Field("json", description="API and worker logs: one JSON object per line, or text")

    # Webhooks (docs/webhooks.md): where events may go, how long a receiver is waited for, how long
    # delivery is retried. Delays stay under visibility_timeout_s: a Redis-broker message waiting
    # longer would be delivered twice.
    webhook_allow: str = Field("", description="comma-separated allow-list of webhook URL prefixes "
                               "(scheme://host[:port][/path], host may be *.domain or an IP literal; ' private' after "
                               "an entry also permits non-public addresses); empty: no webhooks")
    webhook_connect_timeout_s: float = Field(2.0, gt=0, le=30, description="connecting to a webhook receiver")
    webhook_read_timeout_s: float = Field(5.0, gt=0, le=60, description="waiting for a receiver's answer")
    webhook_max_response_bytes: int = Field(64 << 10, ge=0, description="most of a receiver's answer read")
    webhook_retry_base_s: float = Field(5.0, gt=0, description="first retry after this; doubles each time")
    webhook_retry_max_s: float = Field(900.0, gt=0, description="longest wait between two attempts")
    webhook_retry_for_s: float = Field(24 * 3600.0, ge=0, description="retries stop this long after the event")
    webhook_secret_overlap_s: float = Field(24 * 3600.0, ge=0, description="after `poolq webhooks secret "
                                            "--rotate`, events are signed with the old secret too for this long")
    # Deliveries run on a worker of their own (the webhooks queue); one tenant's receivers hold at most
    # webhook_tenant_concurrency of its threads at once (products/webhooks/tenant_turns.py).
    webhook_concurrency: int = Field(8, ge=1, description="threads of the webhook worker `poolq worker` starts "
                                     "(deliveries wait on receivers, not on the CPU)")
    webhook_tenant_concurrency: int = Field(2, ge=1, description="one tenant's deliveries in flight at once, over "
                                            "every webhook worker; more wait their turn")
    webhook_busy_retry_s: float = Field(1.0, gt=0, le=60, description="a delivery whose tenant has its "
                                        "deliveries in flight is sent again after about this long (jittered)")

    # Celery timeouts, ordered soft < hard < visibility_timeout / 2 (checked below).
    task_soft_time_limit_s: int = 1200
    task_time_limit_s: int = 1500
    visibility_timeout_s: int = 3600
    # Planning reads the whole input in one task (under a renewed lease, so a redelivery past the
    # visibility timeout finds it held and does nothing): its limit is its own, not a shard's.
    plan_soft_time_limit_s: int = Field(6 * 3600, ge=1)
    plan_time_limit_s: int = Field(6 * 3600 + 300, ge=1)

    # Content-addressed reuse (docs/reuse.md): a tenant's stored outputs, and how long a shard waits
    # for the shard that computes a text it repeats (then it computes the text itself).
    reuse_enabled: bool = Field(True, description="false: every record is computed, repeats too (an operator's "
                                "switch, and the benchmark's baseline)")
    reuse_ttl_s: float | None = Field(30 * 86400, gt=0, description="a tenant's stored outputs are evicted this "
                                      "long after they were computed (None: kept until the quota needs room)")
    reuse_quota_bytes: int | None = Field(10 << 30, ge=0, description="a tenant's stored outputs beyond this are "
                                          "evicted, oldest first (None: no limit)")
    reuse_wait_s: float = Field(300.0, ge=0, description="a shard waits this long for the shard computing a text "
                                "it repeats before computing it itself")
    reuse_poll_s: float = Field(0.5, gt=0, description="how often a waiting shard looks for that shard's commit")

    def model_post_init(self, __context: object) -> None:
        if not self.plan_soft_time_limit_s < self.plan_time_limit_s:
            raise ValueError("timeouts must satisfy plan_soft_time_limit_s < plan_time_limit_s")
        if not self.task_soft_time_limit_s < self.task_time_limit_s < self.visibility_timeout_s / 2:
            raise ValueError(
                "timeouts must satisfy task_soft_time_limit_s < task_time_limit_s < visibility_timeout_s / 2; got "
                f"{self.task_soft_time_limit_s}, {self.task_time_limit_s}, {self.visibility_timeout_s}"
            )

    def s3_config(self, role: Role = "worker") -> S3Config:
        """How ``role``'s processes reach the store: its deadlines and retries."""
        return S3Config(
            endpoint_url=self.s3_endpoint_url,
            access_key_id=self.s3_access_key_id,
            secret_access_key=self.s3_secret_access_key,
            region=self.s3_region,
            multipart_threshold_bytes=self.s3_multipart_threshold_bytes,
            multipart_part_bytes=min(16 << 20, self.s3_multipart_threshold_bytes),
            max_attempts=self.s3_api_max_attempts if role == "api" else self.s3_max_attempts,
            connect_timeout_s=self.s3_connect_timeout_s,
            read_timeout_s=self.s3_api_read_timeout_s if role == "api" else self.s3_worker_read_timeout_s,
        )

    def object_store(self, role: Role = "worker") -> ObjectStore:
        if self.store == "local":
            return LocalObjectStore(self.local_store_root)
        config = self.s3_config(role)
        return S3ObjectStore(make_s3_client(config), self.bucket, config)

    @property
    def worker_tokens_per_s(self) -> float:
        """A worker's embedding throughput: ``shard_tokens_per_s``, else the estimate for ``device``."""
        return self.shard_tokens_per_s or (50_000.0 if self.device.startswith("cuda") else 2_000.0)

    @property
    def step_tokens(self) -> int:
        """Tokens per engine step: ``max_num_batched_tokens``, else the default for ``device``."""
        return self.max_num_batched_tokens or (8192 if self.device.startswith("cuda") else 2048)

    @property
    def shard_token_budget(self) -> int:
        """Estimated tokens per shard: ``shard_work_s`` of work at ``shard_tokens_per_s``."""
        return max(1, int(self.shard_work_s * self.worker_tokens_per_s))

    @property
    def embeddings_request_tokens(self) -> int:
        """The most estimated tokens one ``/v1/embeddings`` request may hold: ``embeddings_max_request_tokens``,
        else a quarter of ``embeddings_timeout_s`` at a worker's throughput (so a request the limit lets
        through is answered well before its deadline, even while the worker runs a shard)."""
        if self.embeddings_max_request_tokens is not None:
            return self.embeddings_max_request_tokens
        return max(512, int(self.embeddings_timeout_s / 4 * self.worker_tokens_per_s))

    @property
    def compute_dtype(self) -> str:
        """The dtype the engine computes in here: ``dtype``, with ``auto`` resolved for this machine's
        CPU; on a CUDA device ``auto`` stays, resolved where the engine loads (CUDA is not touched here)."""
        return resolve_dtype_before_fork(self.dtype, self.device)

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            device=self.device,
            dtype=self.compute_dtype,
            max_num_batched_tokens=self.step_tokens,
            max_num_seqs=self.max_num_seqs,
            max_chunks_per_document=self.max_chunks_per_document,
            lookahead_tokens=max(65536, self.step_tokens),
        )

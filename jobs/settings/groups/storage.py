"""Where job inputs, shards and results live (an S3 bucket or a local directory), and how they are reached."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from poolq.jobs.settings.group import Role, SettingsGroup
from poolq.storage import LocalObjectStore, ObjectStore, S3Config, S3ObjectStore, make_s3_client


class StoreSettings(SettingsGroup):
    """The object store: which one, its bucket and prefix, credentials, deadlines and retries."""

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
    upload_expires_s: int = Field(900, ge=60, le=3600)
    require_conditional_writes: bool = True

    # Deadlines of every call to the store (README, "Deadlines"). A stalled store is an error after
    # these, classified retryable (jobs/steps/failures.py): on the API's request path a 503 with
    # Retry-After within ~5 s; in a worker a retry, as for an outage.
    s3_connect_timeout_s: float = Field(2.0, gt=0, description="connecting to the object store")
    s3_api_read_timeout_s: float = Field(2.0, gt=0, description="the API waits this long for the store's next bytes")
    s3_api_max_attempts: int = Field(1, ge=0, description="retries of an S3 request on the API's request path")
    s3_worker_read_timeout_s: float = Field(30.0, gt=0, description="workers (and beat, the CLI) wait this long for "
                                            "the store's next bytes; their retries: s3_max_attempts")

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

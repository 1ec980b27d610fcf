"""S3-compatible object store (AWS S3, MinIO, SeaweedFS) through boto3."""
from __future__ import annotations

import builtins
import io
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator

from poolq.storage.object_keys import validate_key
from poolq.storage.object_store import (
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    PendingUpload,
    StorageError,
)


@dataclass(frozen=True)
class S3Config:
    """How to reach an S3-compatible endpoint. ``endpoint_url=None`` means AWS itself."""

    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str = "us-east-1"
    max_attempts: int = 5  # botocore's retries.max_attempts: retries after the first try
    # Every request has a deadline: connecting, and then each wait for the server's next bytes (a
    # stalled store is an error after read_timeout_s, retried up to max_attempts times, not a hang).
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 60.0
    # Bodies above this are sent as multipart uploads (unconditional writes only).
    multipart_threshold_bytes: int = 64 << 20
    multipart_part_bytes: int = 16 << 20


def make_s3_client(config: S3Config) -> Any:
    """A boto3 S3 client: path-style addressing, botocore ``standard`` retries, connect and read deadlines."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=config.endpoint_url,
        aws_access_key_id=config.access_key_id,
        aws_secret_access_key=config.secret_access_key,
        region_name=config.region,
        config=Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"mode": "standard", "max_attempts": config.max_attempts},
            connect_timeout=config.connect_timeout_s,
            read_timeout=config.read_timeout_s,
        ),
    )
    client.meta.events.register("before-send.s3.PutObject", _no_expect_for_empty_body)
    return client


def _no_expect_for_empty_body(request, **_: Any) -> None:
    """Send an empty PUT without ``Expect: 100-continue``.

    SeaweedFS (4.48) answers such a request with a stray extra response that stays on the
    pooled connection, and the next request on it reads it and then stalls until the read
    timeout. Without the header an empty PUT is a plain request/response.
    """
    if str(request.headers.get("Content-Length", "")) in ("0", "b'0'") and "Expect" in request.headers:
        del request.headers["Expect"]  # not a signed header: removing it keeps the signature valid


def _error_code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


@contextmanager
def _as_storage_error(what: str):
    """botocore's errors (after its own retries) become StorageError, which callers classify."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise StorageError(f"{what} failed: {exc}") from exc


class S3ObjectStore(ObjectStore):
    """Keys live in one bucket. Conditional writes use ``If-None-Match: *``."""

    def __init__(self, client: Any, bucket: str, config: S3Config | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.config = config or S3Config()

    def put(self, key: str, data: bytes, *, if_absent: bool = False) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        key = validate_key(key)
        if not if_absent and len(data) > self.config.multipart_threshold_bytes:
            self._put_multipart(key, data)
            return
        extra = {"IfNoneMatch": "*"} if if_absent else {}
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **extra)
        except ClientError as exc:
            if _error_code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise ObjectExistsError(f"{self.uri(key)} already exists") from None
            raise StorageError(f"writing {self.uri(key)} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"writing {self.uri(key)} failed: {exc}") from exc

    def put_chunks(self, key: str, chunks: Iterable[bytes]) -> None:
        """One PUT if the whole fits under the multipart threshold, else parts as they fill."""
        key = validate_key(key)
        stream, pending = iter(chunks), bytearray()
        for chunk in stream:
            pending += chunk
            if len(pending) > self.config.multipart_threshold_bytes:
                self._put_parts(key, _parts(pending, stream, self.config.multipart_part_bytes))
                return
        self.put(key, bytes(pending))

    def _put_multipart(self, key: str, data: bytes) -> None:
        size = self.config.multipart_part_bytes
        self._put_parts(key, (data[start : start + size] for start in range(0, len(data), size)))

    def _put_parts(self, key: str, bodies: Iterator[bytes]) -> None:
        """Upload ``bodies`` as the parts of one object; abort on error. A writer killed here leaves
        a pending upload behind, which ``pending_uploads`` finds and the reconciler aborts."""
        with _as_storage_error(f"writing {self.uri(key)}"):
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
            try:
                parts = []
                for number, body in enumerate(bodies, start=1):
                    response = self.client.upload_part(
                        Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
                    )
                    parts.append({"ETag": response["ETag"], "PartNumber": number})
                self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
            except BaseException:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
                raise

    def pending_uploads(self, prefix: str) -> list[PendingUpload]:
        uploads = []
        with _as_storage_error(f"listing uploads under {self.uri(prefix)}"):
            paginator = self.client.get_paginator("list_multipart_uploads")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                uploads += [
                    PendingUpload(item["Key"], item["UploadId"], item["Initiated"]) for item in page.get("Uploads", [])
                ]
        return uploads

    def abort_upload(self, upload: PendingUpload) -> None:
        with _as_storage_error(f"aborting the upload of {self.uri(upload.key)}"):
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload.key, UploadId=upload.upload_id)

    def get(self, key: str) -> bytes:
        with self.open(key) as body:
            return body.read()

    def open(self, key: str) -> BinaryIO:
        return self._get(key)

    def _get(self, key: str, **options: str) -> BinaryIO:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=validate_key(key), **options)
        except ClientError as exc:
            if _error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                raise ObjectNotFoundError(f"{self.uri(key)} does not exist") from None
            raise StorageError(f"reading {self.uri(key)} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"reading {self.uri(key)} failed: {exc}") from exc
        return io.BufferedReader(_BodyReader(response["Body"]), buffer_size=1 << 20)

    def open_range(self, key: str, start: int, end: int) -> BinaryIO:
        if end <= start:
            return io.BytesIO(b"")
        return self._get(key, Range=f"bytes={start}-{end - 1}")

    def stat(self, key: str) -> ObjectInfo:
        head = self._head(key)
        if head is None:
            raise ObjectNotFoundError(f"{self.uri(key)} does not exist")
        modified = head.get("LastModified")
        return ObjectInfo(size=int(head["ContentLength"]), version=str(head.get("ETag", "")),
                          modified=modified.timestamp() if modified is not None else None)

    def exists(self, key: str) -> bool:
        return self._head(key) is not None

    def _head(self, key: str) -> dict | None:
        """The object's HEAD answer, or None if there is no such object."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.head_object(Bucket=self.bucket, Key=validate_key(key))
        except ClientError as exc:
            if _error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise StorageError(f"checking {self.uri(key)} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"checking {self.uri(key)} failed: {exc}") from exc

    def list(self, prefix: str) -> Iterator[str]:
        with _as_storage_error(f"listing {self.uri(prefix)}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield item["Key"]

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        names = []
        with _as_storage_error(f"listing {self.uri(prefix)}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/"):
                names += [item["Prefix"][len(prefix):].rstrip("/") for item in page.get("CommonPrefixes", [])]
        return sorted(names)

    def presigned_put_url(self, key: str, expires_s: int) -> str:
        return self.client.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": validate_key(key)}, ExpiresIn=expires_s
        )

    def delete(self, key: str) -> None:
        with _as_storage_error(f"deleting {self.uri(key)}"):
            self.client.delete_object(Bucket=self.bucket, Key=validate_key(key))

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def presigned_get_url(self, key: str, expires_s: int) -> str:
        return self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": validate_key(key)}, ExpiresIn=expires_s
        )


class _BodyReader(io.RawIOBase):
    """Adapts botocore's StreamingBody to a raw stream, so it can be buffered and read by line."""

    def __init__(self, body) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        with _as_storage_error("reading an object's body"):  # a stalled store times out mid-body too
            data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()


def _parts(pending: bytearray, rest: Iterator[bytes], size: int) -> Iterator[bytes]:
    """Parts of ``size`` bytes (the last one shorter) from ``pending`` then ``rest``."""
    for chunk in rest:
        pending += chunk
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    while pending:
        yield bytes(pending[:size])
        del pending[:size]

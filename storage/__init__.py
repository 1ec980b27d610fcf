"""Object stores (S3 and local filesystem) and the formats poolq reads and writes."""
from poolq.storage.conditional_probe import ConditionalWritesUnsupported, verify_conditional_writes
from poolq.storage.embedding_codec import CODECS, EmbeddingCodec, codec_for
from poolq.storage.jsonl import (
    JsonlLineError,
    JsonlObject,
    JsonlProgress,
    dump_jsonl,
    lone_surrogate_path,
    nested_too_deeply,
    read_jsonl,
)
from poolq.storage.local_store import LocalObjectStore
from poolq.storage.object_keys import InvalidKeyError, join_key, validate_key
from poolq.storage.object_store import (
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    PendingUpload,
    StorageError,
    UnsupportedOperation,
)
from poolq.storage.row_columns import (
    RowColumns,
    part_schema,
    read_embeddings,
    read_part,
    read_part_schema,
    type_name,
    write_embeddings,
    write_part,
)
from poolq.storage.s3_store import S3Config, S3ObjectStore, make_s3_client
from poolq.storage.uri import InvalidURIError, ObjectURI, open_uri, parse_uri

__all__ = [
    "RowColumns",
    "part_schema",
    "read_part",
    "read_part_schema",
    "type_name",
    "write_part",
    "CODECS",
    "EmbeddingCodec",
    "codec_for",
    "ConditionalWritesUnsupported",
    "PendingUpload",
    "verify_conditional_writes",
    "InvalidKeyError",
    "InvalidURIError",
    "JsonlLineError",
    "JsonlObject",
    "JsonlProgress",
    "LocalObjectStore",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStore",
    "ObjectURI",
    "S3Config",
    "S3ObjectStore",
    "StorageError",
    "UnsupportedOperation",
    "dump_jsonl",
    "join_key",
    "make_s3_client",
    "open_uri",
    "parse_uri",
    "read_embeddings",
    "lone_surrogate_path",
    "nested_too_deeply",
    "read_jsonl",
    "validate_key",
    "write_embeddings",
]

"""pgvector's column types for a job's rows, and Arrow's types as PostgreSQL's (carried fields).

The vector type follows the output dtype: ``vector`` (float32, and int8 decoded), ``halfvec``
(float16), ``bit`` (binary), ``sparsevec`` (sparse_embed, of the model's vocabulary size).
"""
from __future__ import annotations

import pyarrow as pa

from poolq.products.sinks.sink import SinkError, SinkSchema

_DENSE_TYPES = {"float32": "vector", "int8": "vector", "float16": "halfvec", "binary": "bit"}
# Index operator classes (cosine; bit: Hamming distance). ivfflat does not index sparsevec.
_OPERATORS = {"vector": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops", "bit": "bit_hamming_ops",
              "sparsevec": "sparsevec_cosine_ops"}
DENSE_SQL_COLUMN, SPARSE_SQL_COLUMN = "embedding", "sparse_embedding"


def dense_type(schema: SinkSchema) -> str | None:
    return _DENSE_TYPES[schema.dense_dtype] if schema.dense_dtype else None


def vector_columns(schema: SinkSchema) -> list[tuple[str, str]]:
    """(column, SQL type) of the vectors; SinkError for token vectors (one vector per row here)."""
    if schema.multi_dimensions:
        raise SinkError("pgvector keeps one vector per row: token_embed (multi-vector) jobs load into Qdrant or LanceDB")
    columns = []
    kind = dense_type(schema)
    if kind:
        columns.append((DENSE_SQL_COLUMN, f"{kind}({schema.dimensions})"))
    if schema.sparse:
        if not schema.sparse_dimensions:
            raise SinkError("sparsevec needs the model's vocabulary size, and its config.json has none")
        columns.append((SPARSE_SQL_COLUMN, f"sparsevec({schema.sparse_dimensions})"))
    return columns


def index_target(schema: SinkSchema, method: str) -> tuple[str, str]:
    """(column, operator class) an index on request covers: the dense vectors, else the sparse ones."""
    if dense_type(schema):
        return DENSE_SQL_COLUMN, _OPERATORS[dense_type(schema) or ""]
    if method == "ivfflat":
        raise SinkError("ivfflat does not index sparsevec; use index 'hnsw'")
    return SPARSE_SQL_COLUMN, _OPERATORS["sparsevec"]


def sql_type(data_type: pa.DataType) -> str:
    """A carried field's column type: its Arrow type's nearest; nested values as jsonb."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return "text"
    if pa.types.is_boolean(data_type):
        return "boolean"
    if pa.types.is_int8(data_type) or pa.types.is_int16(data_type) or pa.types.is_uint8(data_type):
        return "smallint"
    if pa.types.is_int32(data_type) or pa.types.is_uint16(data_type):
        return "integer"
    if pa.types.is_integer(data_type):
        return "bigint"
    if pa.types.is_float32(data_type) or pa.types.is_float16(data_type):
        return "real"
    if pa.types.is_float64(data_type):
        return "double precision"
    if pa.types.is_timestamp(data_type):
        return "timestamptz" if data_type.tz else "timestamp"
    if pa.types.is_date(data_type):
        return "date"
    return "jsonb"

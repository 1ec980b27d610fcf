"""Each pooling task's Parquet rows: the part schema and the buffers a shard fills (the common
columns and the Parquet format itself are storage's: ``poolq.storage.row_columns``)."""
from poolq.jobs.tasks.rows.classify_rows import ClassifyRows, classify_schema
from poolq.jobs.tasks.rows.embed_rows import EmbeddingRows, embedding_schema
from poolq.jobs.tasks.rows.multi_rows import MultiRows
from poolq.jobs.tasks.rows.score_rows import ScoreRows, score_schema
from poolq.jobs.tasks.rows.sparse_rows import SparseRows, sparse_schema
from poolq.jobs.tasks.rows.token_rows import TokenClassifyRows, TokenEmbeddingRows, token_classify_schema, token_embedding_schema

__all__ = [
    "ClassifyRows",
    "EmbeddingRows",
    "MultiRows",
    "ScoreRows",
    "SparseRows",
    "TokenClassifyRows",
    "TokenEmbeddingRows",
    "classify_schema",
    "embedding_schema",
    "score_schema",
    "sparse_schema",
    "token_classify_schema",
    "token_embedding_schema",
]

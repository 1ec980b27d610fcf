"""token_embed: one vector per token (multi-vector / ColBERT-style rows), in the job's dtype and
dimensions like embed, with each token's id and character offsets."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from poolq.engine import ModelSpec, PooledData, PoolingOutput, PoolingTask
from poolq.jobs.tasks.embed_task import EmbedTask, model_output_dimensions
from poolq.jobs.tasks.job_task import RowSource, as_dense, token_fields
from poolq.jobs.tasks.rows import TokenEmbeddingRows, token_embedding_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class TokenEmbedTask(EmbedTask):
    """embed's output options and checks; a list of vectors per row instead of one."""

    name = "token_embed"
    summary = "one vector per token, ColBERT-style"
    pooling_task = PoolingTask.TOKEN_EMBED

    def dimensions(self, engine: "PoolingEngine") -> int:
        return self.spec.output.dimensions or engine.token_dimensions

    def rows(self, engine: "PoolingEngine") -> TokenEmbeddingRows:
        return TokenEmbeddingRows(dimensions=self.dimensions(engine), codec=self.spec.output.codec(engine.spec.normalize))

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, TokenEmbeddingRows):
            raise TypeError("token_embed rows expected")
        token_ids, char_offsets = token_fields(result)
        rows.append(source.record_id, as_dense(value, self.name), token_ids, char_offsets, result.num_tokens, result.truncated,
                    source.content_hash)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        return token_embedding_schema(dimensions or model_output_dimensions(model_spec), self.spec.output.codec(normalized=True))

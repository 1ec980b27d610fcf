"""embed: one dense vector per document (or chunk), in the job's dtype and dimensions."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa

from poolq.engine import ModelSpec, PooledData, PoolingOutput, PoolingParams, PoolingTask
from poolq.jobs.tasks.job_task import JobTask, OptionRejected, RowSource, as_dense
from poolq.jobs.tasks.rows import EmbeddingRows, embedding_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class EmbedTask(JobTask):
    name = "embed"
    summary = "dense vectors, one per document or chunk"
    pooling_task = PoolingTask.EMBED
    output_options = frozenset({"dtype", "dimensions", "int8_range"})

    def check_options(self, model_spec: ModelSpec) -> None:
        """``dimensions`` within the model's vectors, int8 calibrated."""
        output, spec = self.spec.output, self.spec
        model_dimensions = model_output_dimensions(model_spec)
        if output.dimensions is not None and output.dimensions > model_dimensions:
            raise OptionRejected("output.dimensions", f"dimensions={output.dimensions} exceeds the {model_dimensions} "
                                                      f"dimensions of model {spec.model!r}")
        try:
            output.codec(model_spec.normalize)
        except ValueError as exc:
            raise OptionRejected("output.int8_range", str(exc)) from None

    def params(self) -> PoolingParams:
        return PoolingParams(dimensions=self.spec.output.dimensions)

    def dimensions(self, engine: "PoolingEngine") -> int:
        return self.spec.output.dimensions or engine.dimensions  # the engine fails records asking for more

    def rows(self, engine: "PoolingEngine") -> RowColumns:  # token_embed's subclass makes token rows
        # The codec is fixed for the job: the same int8 range in every shard.
        return EmbeddingRows(dimensions=self.dimensions(engine), with_chunks=self.chunk_rows,
                             codec=self.spec.output.codec(engine.spec.normalize))

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, EmbeddingRows):
            raise TypeError("embed rows expected")
        rows.append(source.record_id, as_dense(value, self.name), result.num_tokens, result.truncated, source.chunk,
                    content_hash=source.content_hash, split=source.split)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        # A job passed its checks, so int8 without int8_range means a normalized model: [-1, 1].
        return embedding_schema(dimensions or default_output_dimensions(model_spec), self.chunk_rows,
                                self.spec.output.codec(normalized=True))


def model_output_dimensions(model_spec: ModelSpec) -> int:
    """The size of the model's embed vectors, without its weights: the last sentence-transformers
    Dense module's ``out_features``, else the hidden size (what the loaded engine reports)."""
    if not model_spec.dense_dirs:
        return model_spec.hidden_size
    path = model_spec.path / model_spec.dense_dirs[-1] / "config.json"
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["out_features"])
    except (OSError, ValueError, KeyError) as exc:
        raise OptionRejected("model", f"the model cannot be loaded: {path}: {exc}") from None


def default_output_dimensions(model_spec: ModelSpec) -> int:
    """The size of the model's embed vectors when a job names no dimensions: cut to its ``truncate_dim``
    (what the loaded engine's ``dimensions`` reports)."""
    full = model_output_dimensions(model_spec)
    return min(full, model_spec.truncate_dim or full)

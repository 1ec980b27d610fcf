"""classify: each label's score after the model's activation (or raw logits), the top label, and
for multi-label models every label at or above the job's threshold."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from poolq.engine import ModelSpec, PooledData, PoolingOutput, PoolingParams, PoolingTask
from poolq.jobs.tasks.job_task import JobTask, OptionRejected, RowSource, as_dense
from poolq.jobs.tasks.rows import ClassifyRows, classify_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class ClassifyTask(JobTask):
    name = "classify"
    summary = "label scores of a sequence classifier"
    pooling_task = PoolingTask.CLASSIFY
    output_options = frozenset({"activation", "label_threshold"})

    def check_options(self, model_spec: ModelSpec) -> None:
        if "label_threshold" in self.spec.output.model_fields_set and not model_spec.multi_label:
            raise OptionRejected("output.label_threshold",
                                 f"output.label_threshold applies to multi-label models; {self.spec.model!r} is not one "
                                 "(its config.json has no problem_type 'multi_label_classification')")

    def params(self) -> PoolingParams:
        return PoolingParams(activation=self.spec.output.activation)

    def rows(self, engine: "PoolingEngine") -> ClassifyRows:
        return ClassifyRows(with_chunks=self.chunk_rows, label_names=engine.spec.labels,
                            multi_label=engine.spec.multi_label, threshold=self.spec.output.label_threshold)

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, ClassifyRows):
            raise TypeError("classify rows expected")
        scores = as_dense(value, self.name)
        # Multi-label scores are sigmoids; with raw logits the threshold still means a probability.
        threshold_scores = None if self.spec.output.activation else 1.0 / (1.0 + np.exp(-scores))
        rows.append(source.record_id, scores, result.num_tokens, result.truncated, source.chunk, content_hash=source.content_hash,
                    split=source.split, threshold_scores=threshold_scores)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        return classify_schema(model_spec.multi_label, self.chunk_rows)

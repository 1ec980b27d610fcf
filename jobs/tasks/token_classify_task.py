"""token_classify: each token's top label and score (with ``output.token_label_scores`` every
label's), and the entities grouped from B-/I- tags."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from poolq.engine import ModelSpec, PooledData, PoolingOutput, PoolingTask
from poolq.jobs.tasks.entity_groups import TaggedToken, group_entities
from poolq.jobs.tasks.job_task import JobTask, RowSource, as_dense, token_fields
from poolq.jobs.tasks.rows import TokenClassifyRows, token_classify_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class TokenClassifyTask(JobTask):
    name = "token_classify"
    summary = "a label per token, e.g. named entities"
    pooling_task = PoolingTask.TOKEN_CLASSIFY
    output_options = frozenset({"token_label_scores"})

    def rows(self, engine: "PoolingEngine") -> TokenClassifyRows:
        return TokenClassifyRows(label_names=engine.spec.labels, special_tokens=engine.tokenizer.special_token_counts,
                                 with_label_scores=self.spec.output.token_label_scores)

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, TokenClassifyRows):
            raise TypeError("token_classify rows expected")
        scores = as_dense(value, self.name)  # [num_tokens, num_labels]
        token_ids, char_offsets = token_fields(result)
        top = scores.argmax(axis=1)
        labels = [rows.label_names[index] for index in top.tolist()]
        top_scores = scores[np.arange(len(top)), top]
        before, after = rows.special_tokens
        content = range(before, len(labels) - after)
        tagged = [TaggedToken(labels[i], float(top_scores[i]), int(char_offsets[i, 0]), int(char_offsets[i, 1]))
                  for i in content]
        rows.append(source.record_id, labels, top_scores, group_entities(tagged), token_ids, char_offsets, result.num_tokens,
                    result.truncated, source.content_hash, label_scores=scores)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        return token_classify_schema(len(model_spec.labels) if self.spec.output.token_label_scores else None)

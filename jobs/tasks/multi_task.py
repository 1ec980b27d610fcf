"""Several tasks of one job from one forward pass (``"task": ["embed", "sparse_embed",
"token_embed"]``): one row per document with each task's column group, in task order."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar, Iterator

import pyarrow as pa

from poolq.engine import (
    EngineResult,
    ModelSpec,
    MultiOutput,
    PolicyError,
    PooledData,
    PoolingOutput,
    PoolingRequest,
    PoolingTask,
    check_multi_task_mode,
)
from poolq.engine.scheduling.step import StepOutput
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.tasks.job_task import JobTask, OptionRejected, RowSource
from poolq.jobs.tasks.rows import MultiRows
from poolq.storage import RowColumns, part_schema

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

_COMMON_COLUMNS = frozenset({"id", "num_tokens", "truncated", "content_hash"})


class MultiTask(JobTask):
    name: ClassVar[str] = "multi"

    def __init__(self, spec: JobSpec, parts: list[JobTask]) -> None:
        super().__init__(spec)
        self.parts = parts
        self.output_options = frozenset().union(*(part.output_options for part in parts))  # type: ignore[misc]

    def pooling_task_of(self, model_spec: ModelSpec) -> PoolingTask:
        for part in self.parts:
            part.pooling_task_of(model_spec)  # each must be served; the first leads the request
        return self.parts[0].pooling_task

    def check_options(self, model_spec: ModelSpec) -> None:
        for part in self.parts:
            part.check_options(model_spec)
        try:
            check_multi_task_mode(self.spec.long_documents.mode)
        except PolicyError as exc:
            raise OptionRejected("long_documents.mode", str(exc)) from None

    def dimensions(self, engine: "PoolingEngine") -> int | None:
        return next((dims for part in self.parts if (dims := part.dimensions(engine)) is not None), None)

    def run(self, engine: "PoolingEngine", records: dict[str, InputRecord],
            on_step: Callable[[StepOutput], None] | None = None) -> Iterator[EngineResult]:
        also = tuple(part.pooling_task for part in self.parts[1:])
        requests = (PoolingRequest(key=record_id, text=record.text, task=self.parts[0].pooling_task,
                                   params=self.parts[0].request_params(), also=also) for record_id, record in records.items())
        return engine.run(requests, self.spec.long_documents.policy(), on_step=on_step)

    def rows(self, engine: "PoolingEngine") -> MultiRows:
        return MultiRows(groups=[part.rows(engine) for part in self.parts])

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, MultiRows) or not isinstance(value, MultiOutput):
            raise TypeError("several tasks' rows and outputs expected")
        for part, group in zip(self.parts, rows.groups):
            part.append_value(group, value.outputs[part.pooling_task], result, source)
        rows.append_row(source.record_id, result.num_tokens, result.truncated, source.chunk, source.content_hash, source.split)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        values = [column for part in self.parts for column in part.schema(model_spec, dimensions)
                  if column.name not in _COMMON_COLUMNS]
        return part_schema(values, with_chunks=False)

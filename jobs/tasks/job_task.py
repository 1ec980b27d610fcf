"""A job's task: what it asks of the engine, which output options apply, how its rows are written.

One subclass per task (``embed_task.py``, ``sparse_task.py``, ``classify_task.py``), registered
in ``__init__.py``; an instance serves one job's spec. Submission checks the spec against its
model with :meth:`JobTask.check` (from the model's declarations: no weights are loaded); a
shard builds its rows with :meth:`rows` and :meth:`append`; the finalizer records
:meth:`schema` in the manifest.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator

import numpy as np
import pyarrow as pa

from poolq.engine import (
    ChunkRows,
    EngineResult,
    ModelSpec,
    PooledData,
    PoolingOutput,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
)
from poolq.engine.scheduling.step import StepOutput
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.spec.job_spec import JobSpec, OutputOptions
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

ChunkFields = tuple[int, int, int, int, int] | None


@dataclass(frozen=True)
class RowSource:
    """Where one output row comes from: its record, and the chunk it holds in the chunk modes."""

    record: InputRecord
    chunk: ChunkFields = None
    split: bool = False

    @property
    def record_id(self) -> str:
        return self.record.id

    @property
    def content_hash(self) -> str:
        return self.record.content_hash


class OptionRejected(ValueError):
    """An output option the task or model cannot follow; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class JobTask(ABC):
    name: ClassVar[str]
    summary: ClassVar[str] = ""  # what a job of this task makes, in a few words (`poolq submit --help` lists it)
    pooling_task: ClassVar[PoolingTask]
    # The output options this task takes besides ``format``; any other set to a non-default value is a 422.
    output_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec

    @property
    def chunk_rows(self) -> bool:
        return self.spec.long_documents.mode.chunk_rows

    def pooling_task_of(self, model_spec: ModelSpec) -> PoolingTask:
        """The engine task this job runs on ``model_spec``'s model; OptionRejected("task") if it serves none."""
        if self.pooling_task not in model_spec.kind.tasks:
            served = ", ".join(task.value for task in model_spec.kind.tasks)
            raise OptionRejected("task", f"model {self.spec.model!r} serves {served}, not {self.name!r}")
        return self.pooling_task

    def check(self, model_spec: ModelSpec) -> None:
        """Raise :class:`OptionRejected` for output options that do not apply to this task or model."""
        defaults, output = OutputOptions(), self.spec.output
        for name in sorted(output.model_fields_set - self.output_options - {"format", "include_fields"}):
            if getattr(output, name) != getattr(defaults, name):
                takes = ", ".join(sorted(self.output_options)) or "none of them"
                raise OptionRejected(f"output.{name}", f"output.{name} does not apply to task {self.spec.task_label!r} "
                                                       f"(its output options: {takes})")
        if self.spec.score_mode != "auto" and self.spec.task != "score":
            raise OptionRejected("score_mode", f"score_mode applies to task 'score', not {self.spec.task_label!r}")
        self.check_options(model_spec)

    def check_options(self, model_spec: ModelSpec) -> None:
        """The task's own checks of its options against the model (after foreign options are refused)."""

    def params(self) -> PoolingParams:
        """The task's own engine parameters (its output options)."""
        return PoolingParams()

    def request_params(self) -> PoolingParams:
        """What each of the job's engine requests asks: the task's parameters and the job's prompt."""
        return replace(self.params(), prompt_name=self.spec.prompt_name, prompt=self.spec.prompt)

    def run(self, engine: "PoolingEngine", records: dict[str, InputRecord],
            on_step: Callable[[StepOutput], None] | None = None) -> Iterator[EngineResult]:
        """The engine's result for each record (by id), in order; ``on_step`` sees each engine step."""
        requests = (
            PoolingRequest(key=record_id, text=record.text, task=self.pooling_task, params=self.request_params(),
                           chunk_spans=_spans(record.chunk_spans))
            for record_id, record in records.items()
        )
        return engine.run(requests, self.spec.long_documents.policy(), on_step=on_step)

    def dimensions(self, engine: "PoolingEngine") -> int | None:
        """The size of the job's vectors, for tasks that write fixed-size vectors."""
        return None

    @abstractmethod
    def rows(self, engine: "PoolingEngine") -> RowColumns:
        """Empty buffers for one part."""

    @abstractmethod
    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        """Append one row holding ``value``."""

    @abstractmethod
    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        """The job's Parquet schema (the manifest records it)."""

    def append(self, rows: RowColumns, result: PoolingOutput, record: InputRecord, included: dict | None = None) -> None:
        """One row per document, or one per chunk in the chunk modes; each names the document's content
        hash and carries its ``included`` fields (column values by name)."""
        # One document, one row (most rows): a tuple of it, not a generator
        row_values = ((result.data, None, False),) if result.chunks is None else _chunk_rows(result)
        for value, chunk, split in row_values:
            self.append_value(rows, value, result, RowSource(record, chunk, split))  # type: ignore[arg-type]
            if rows.included_types:
                rows.append_included(included or {})


def _chunk_rows(result: PoolingOutput) -> Iterator[tuple[PooledData, ChunkFields, bool]]:
    for value, chunk in zip(result.data, result.chunks or ()):  # type: ignore[arg-type]
        yield value, (chunk.chunk_index, chunk.token_start, chunk.token_end, chunk.char_start, chunk.char_end), chunk.split


def _spans(raw: list[list[int]] | None) -> tuple[tuple[int, int], ...] | None:
    return None if raw is None else tuple((start, end) for start, end in raw)


def token_fields(result: PoolingOutput) -> tuple[np.ndarray, np.ndarray]:
    """A token task's token ids ``[n]`` and char offsets ``[n, 2]``."""
    if result.token_ids is None or result.char_offsets is None:
        raise TypeError("a token task's output came without its token ids and offsets")
    return result.token_ids, result.char_offsets


def as_dense(value: PooledData | ChunkRows, task: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"task {task!r} got a sparse vector from the engine")
    return value

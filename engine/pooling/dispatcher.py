"""Routes each request of a batch to the pooler of its task; tasks may be mixed in one batch."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch

from poolq.engine.batch import BatchMetadata
from poolq.engine.pooling.metadata import PoolingMetadata
from poolq.engine.pooling.pooler import Pooler
from poolq.engine.pooling.window_combiners import WindowCombiner
from poolq.engine.request import MultiOutput, PooledData, PoolingParams, PoolingRequest, PoolingTask


class UnsupportedTaskError(ValueError):
    """A task the loaded model does not serve."""


class PoolerDispatcher:
    """One pooler per task the model supports, fixed at load time."""

    def __init__(self, poolers: dict[PoolingTask, Pooler]) -> None:
        if not poolers:
            raise ValueError("a model must support at least one task")
        self.poolers = dict(poolers)

    @property
    def supported_tasks(self) -> tuple[PoolingTask, ...]:
        return tuple(self.poolers)

    def check(self, task: PoolingTask) -> None:
        if task not in self.poolers:
            names = ", ".join(t.value for t in self.poolers)
            raise UnsupportedTaskError(f"this model does not support task {task.value!r}; it supports: {names}")

    @property
    def embed_head(self):
        """The head of the embed pooler (late chunking applies it to chunk means), if any."""
        pooler = self.poolers.get(PoolingTask.EMBED)
        return pooler.head if pooler is not None else None

    def head(self, task: PoolingTask):
        """The head of ``task``'s pooler (token plans run it over stitched states)."""
        self.check(task)
        return self.poolers[task].head

    def window_combiner(self, task: PoolingTask, params: PoolingParams) -> WindowCombiner:
        """How ``chunked`` mode folds windows for ``task`` (its head decides); raises
        UnsupportedTaskError for a task whose head has none (the token tasks)."""
        self.check(task)
        make = getattr(self.poolers[task].head, "window_combiner", None)
        if make is None:
            raise UnsupportedTaskError(f"task {task.value!r} has no chunked mode")
        return make(params)

    def forward(self, hidden_states: torch.Tensor, batch: BatchMetadata,
                requests: Sequence[PoolingRequest | None]) -> list[PooledData | None]:
        """``requests[i]`` is the request of the batch's sequence ``i`` (None: not pooled here);
        outputs come in that order (a MultiOutput for a request of several tasks)."""
        rows_by_task: dict[PoolingTask, list[int]] = defaultdict(list)
        params_by_task: dict[PoolingTask, list[PoolingParams]] = defaultdict(list)
        for row, request in enumerate(requests):
            if request is not None:
                for task in request.all_tasks:
                    rows_by_task[task].append(row)
                    params_by_task[task].append(request.params)
        by_task: dict[PoolingTask, dict[int, PooledData]] = {}
        for task, rows in rows_by_task.items():
            self.check(task)
            meta = PoolingMetadata.for_rows(batch, rows, params_by_task[task], hidden_states.device)
            by_task[task] = dict(zip(rows, self.poolers[task].forward(hidden_states, meta)))
        outputs: list[PooledData | None] = [None] * len(requests)
        for row, request in enumerate(requests):
            if request is None:
                continue
            if request.also:
                outputs[row] = MultiOutput({task: by_task[task][row] for task in request.all_tasks})  # type: ignore[misc]
            else:
                outputs[row] = by_task[request.task][row]
        return outputs

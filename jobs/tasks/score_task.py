"""score: one number per (query, text) pair, by a cross-encoder, a bi-encoder's cosine, or
late-interaction MaxSim, whichever the job asks for (``score_mode``) or the model serves first.

Bi-encoder modes embed each distinct query of a shard once: a rerank's query comes with many texts.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import pyarrow as pa

from poolq.engine import (
    EngineResult,
    LongDocumentMode,
    ModelSpec,
    PooledData,
    PoolingOutput,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
)
from poolq.engine.scheduling.step import StepOutput
from poolq.engine.scoring import SCORE_MODE_TASKS, maxsim, score_modes
from poolq.jobs.inputs.records import InputRecord
from poolq.jobs.tasks.job_task import JobTask, OptionRejected, RowSource, as_dense
from poolq.jobs.tasks.rows import ScoreRows, score_schema
from poolq.storage import RowColumns

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

_PAIR_MODES = (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE)
_QUERY = "query"  # the second part of a bi-encoder request key: (text, _QUERY) or (record id, _TEXT)
_TEXT = "text"


class ScoreTask(JobTask):
    name = "score"
    summary = "query-document relevance scores"
    pooling_task = PoolingTask.CLASSIFY  # cross_encoder's; pooling_task_of says which the job runs

    def mode_of(self, model_spec: ModelSpec) -> str:
        served = score_modes(model_spec)
        wanted = self.spec.score_mode
        if not served:
            tasks = ", ".join(task.value for task in model_spec.kind.tasks)
            raise OptionRejected("task", f"model {self.spec.model!r} serves {tasks}, not 'score' (no pair-scoring mode)")
        if wanted == "auto":
            return served[0]
        if wanted not in served:
            raise OptionRejected("score_mode", f"score_mode {wanted!r} is not served by model {self.spec.model!r}; "
                                               f"it serves {', '.join(served)}")
        return wanted

    def pooling_task_of(self, model_spec: ModelSpec) -> PoolingTask:
        return SCORE_MODE_TASKS[self.mode_of(model_spec)]

    def check_options(self, model_spec: ModelSpec) -> None:
        if self.mode_of(model_spec) == "cross_encoder" and self.spec.prompt is not None:
            # A pair goes through the model as one sequence; sentence-transformers' CrossEncoder takes no prompt.
            raise OptionRejected("prompt", "a prompt does not apply to score_mode 'cross_encoder' (a pair is one "
                                           "sequence); prompts apply to the cosine and maxsim modes")
        if self.spec.incremental_from is not None:
            raise OptionRejected("incremental_from", "incremental_from does not apply to task 'score': a query's pairs "
                                                     "are ranked together, so carried pairs would keep stale ranks")
        mode = self.spec.long_documents.mode
        if mode not in _PAIR_MODES:
            raise OptionRejected("long_documents.mode", f"long_documents.mode={mode.value!r} does not apply to task "
                                                        "'score': pairs take 'error' or 'truncate'")

    def run(self, engine: "PoolingEngine", records: dict[str, InputRecord],
            on_step: Callable[[StepOutput], None] | None = None) -> Iterator[EngineResult]:
        mode = self.mode_of(engine.spec)
        policy = self.spec.long_documents.policy()
        if mode == "cross_encoder":
            requests = (PoolingRequest(key=record_id, text=_query(record), text_pair=record.text, task=PoolingTask.CLASSIFY,
                                       params=self.request_params()) for record_id, record in records.items())
            yield from engine.run(requests, policy, on_step=on_step)
            return
        yield from _bi_encoder_scores(engine, records, SCORE_MODE_TASKS[mode], policy, on_step, self.request_params())

    def rows(self, engine: "PoolingEngine") -> ScoreRows:
        return ScoreRows()

    def append_value(self, rows: RowColumns, value: PooledData, result: PoolingOutput, source: RowSource) -> None:
        if not isinstance(rows, ScoreRows):
            raise TypeError("score rows expected")
        rows.append(source.record_id, float(as_dense(value, self.name).reshape(-1)[0]), result.num_tokens, result.truncated,
                    source.content_hash, source.record.query_id)

    def schema(self, model_spec: ModelSpec, dimensions: int | None) -> pa.Schema:
        return score_schema()


def _bi_encoder_scores(engine: "PoolingEngine", records: dict[str, InputRecord], task: PoolingTask, policy,
                       on_step: Callable[[StepOutput], None] | None, task_params: PoolingParams) -> Iterator[EngineResult]:
    """Each distinct query once, then each text; a pair's score from its two outputs."""
    params = replace(task_params, normalize=True)
    queries = list(dict.fromkeys(_query(record) for record in records.values()))
    requests = [PoolingRequest(key=(query, _QUERY), text=query, task=task, params=params) for query in queries]
    requests += [PoolingRequest(key=(record_id, _TEXT), text=record.text, task=task, params=params)
                 for record_id, record in records.items()]
    results = engine.run(requests, policy, on_step=on_step)
    # Results come in request order: the queries' first, each keyed (query, _QUERY).
    embedded: dict[str, EngineResult] = {query: next(results) for query in queries}
    charged: set[str] = set()  # queries whose model run a pair's usage counted already
    for record_id, result in zip(records, results):
        query = _query(records[record_id])
        yield _pair_score(record_id, embedded[query], result, task, query_ran=query not in charged)
        charged.add(query)


def _query(record: InputRecord) -> str:
    """A pair's first text: planning accepted the record for a score job only with one."""
    if record.query is None:
        raise TypeError(f"record {record.id!r} of a score job has no query")
    return record.query


def _pair_score(record_id: str, query: EngineResult, text: EngineResult, task: PoolingTask,
                query_ran: bool) -> EngineResult:
    """The pair's score; its usage counts the query's tokens on the query's first pair only (``query_ran``)."""
    if isinstance(query, RequestError):
        return RequestError(record_id, query.code, f"query: {query.message}")
    if isinstance(text, RequestError):
        return RequestError(record_id, text.code, f"text: {text.message}")
    q, t = as_dense(query.data, "score"), as_dense(text.data, "score")
    score = maxsim(q, t) if task is PoolingTask.TOKEN_EMBED else float(q @ t)
    return PoolingOutput(record_id, np.array([score], dtype=np.float32), query.num_tokens + text.num_tokens,
                         query.truncated or text.truncated, query.processed_tokens * query_ran + text.processed_tokens)

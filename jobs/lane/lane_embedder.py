"""A worker's answer to one lane request: its vectors, computed as a job's EmbedTask computes them
(the same PoolingParams and long-document policy, from the same JobSpec), on the process's own
engine, as an urgent run (it takes the engine between two steps of a running shard)."""
from __future__ import annotations

import logging
import time
from typing import Callable, cast

import numpy as np

from poolq.engine import PoolingRequest, RequestError
from poolq.engine.long_documents.policy_check import ONE_RESULT_MODES, narrow_mode_hint
from poolq.engine.scheduling.step import StepOutput
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.lane.embedding_lane import TakenRequest
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest, InputError, LaneInput
from poolq.jobs.tasks import EmbedTask
from poolq.jobs.tasks.finite_results import non_finite_error
from poolq.jobs.tasks.job_task import as_dense

log = logging.getLogger(__name__)


class DeadlinePassed(Exception):
    """The request's caller has stopped waiting: stop its run between two steps."""


def embed_taken(engines: Callable[[], EnginePool], taken: TakenRequest) -> EmbeddingReply | None:
    """The reply to ``taken``, on ``engines()``; None if its deadline passed first (nobody would read
    the reply). A failure of the worker's own (its context or the model cannot load, the device
    fails) is a reply too, so the caller hears of it at once instead of at its deadline."""
    request = taken.request
    try:
        return _embed(engines, request, taken.deadline)
    except DeadlinePassed:
        log.warning("lane request %s: dropped, its deadline passed while it ran", taken.request_id)
        return None
    except Exception as exc:  # noqa: BLE001 - any failure is reported to the caller, and logged here
        log.exception("lane request %s (model %s, %d inputs) failed", taken.request_id, request.model,
                      len(request.inputs))
        return EmbeddingReply(failure=f"{type(exc).__name__}: {exc}")


def _embed(pool: Callable[[], EnginePool], request: EmbeddingRequest, deadline: float) -> EmbeddingReply:
    spec = request.job_spec()
    task = EmbedTask(spec)
    engines = pool()
    engine = engines.get(spec.model)  # loaded here if no shard loaded it yet
    _check_deadline(deadline)
    inputs: list[LaneInput] = list(request.inputs)
    vocabulary = int(getattr(engine.loaded.hf_config, "vocab_size", 0) or 0)
    refused = [error for index, item in enumerate(inputs) if (error := _token_error(index, item, vocabulary))]
    if refused:
        return EmbeddingReply(errors=refused)
    params = task.request_params()
    requests = (
        PoolingRequest(key=index, text=item, task=task.pooling_task, params=params) if isinstance(item, str) else
        PoolingRequest(key=index, text=f"input {index}", task=task.pooling_task, params=params, token_ids=tuple(item))
        for index, item in enumerate(inputs)
    )
    vectors: list[np.ndarray] = []
    errors: list[InputError] = []
    tokens = 0

    def on_step(_: StepOutput) -> None:
        _check_deadline(deadline)

    with engines.in_use(engine):  # a shard's load of another model leaves it loaded while this runs
        for result in engine.run(requests, spec.long_documents.policy(), on_step=on_step, urgent=True):
            if isinstance(result, RequestError):
                errors.append(InputError(index=cast(int, result.key), code=result.code,
                                         message=narrow_mode_hint(result.message, ONE_RESULT_MODES, "long_documents.mode")))
                continue
            non_finite = non_finite_error(result, engine.config.dtype)
            if non_finite is not None:  # JSON has no NaN: say which input made it, never fail the answer
                errors.append(InputError(index=cast(int, result.key), code=non_finite.code, message=non_finite.message))
                continue
            vectors.append(as_dense(result.data, task.name))
            tokens += result.processed_tokens
    if errors:
        return EmbeddingReply(errors=errors)
    return EmbeddingReply.of_vectors(np.stack(vectors), tokens, engines.identity(spec.model))


def _check_deadline(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise DeadlinePassed()


def _token_error(index: int, item: LaneInput, vocabulary: int) -> InputError | None:
    """Token ids outside the model's vocabulary would index past its embedding table (on a GPU, an
    error that poisons the whole process): refused here, per input."""
    if isinstance(item, str) or not vocabulary:
        return None
    bad = next((token for token in item if not 0 <= token < vocabulary), None)
    if bad is None:
        return None
    return InputError(index=index, code="invalid_token_id",
                      message=f"token id {bad} is outside the model's vocabulary (0..{vocabulary - 1})")

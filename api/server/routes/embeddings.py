"""``POST /v1/embeddings``: OpenAI's embeddings endpoint, answered by a compute worker over the
interactive lane (``poolq.jobs.lane``) with the vectors a job would write for the same inputs,
model and options. The API checks the request as a job submission is checked, sends it, and waits
for the reply; it never loads a model (docs/embeddings.md)."""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

import anyio
from fastapi import APIRouter, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.embeddings_body import EmbeddingsBody, check_limits
from poolq.api.server.embeddings_response import EmbeddingList, embedding_list
from poolq.api.server.guards.strict_json import StrictJsonRoute, strict_body
from poolq.api.server.guards.unavailable import RETRY_AFTER_S
from poolq.api.server.openai_errors import OPENAI_RESPONSES
from poolq.api.server.schemas import OpenAIErrorBody
from poolq.jobs import EmbeddingLane, EmbeddingRequest, JobContext, JobRejected, LaneTimeout, Settings, validate_spec

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/embeddings", tags=["openai"], route_class=StrictJsonRoute, responses=OPENAI_RESPONSES)
# A job's field that the check of a request's job spec names -> the request's own field.
_FIELDS = {"task": ("model",), "output.dimensions": ("dimensions",)}


@dataclass(frozen=True)
class LaneAccess:
    """The app's lane, and the threads that wait on it: a pool of their own, so requests waiting for
    a worker never hold the threads the other routes run on."""

    lane: EmbeddingLane
    waiting: anyio.CapacityLimiter
    settings: Settings  # the app's: limits and timeout
    # Requests waiting, by tenant: counted on the event loop alone (no lock), a tenant's share bounded
    waiting_by_tenant: Counter[str] = field(default_factory=Counter)


def _unavailable(message: str) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"{message}; try again in {RETRY_AFTER_S} s",
                         headers={"Retry-After": str(RETRY_AFTER_S)})


@router.post("", response_model=EmbeddingList, responses={
    413: {"model": OpenAIErrorBody, "description": "too many inputs, or too many tokens in all"},
    429: {"model": OpenAIErrorBody, "description": "the tenant's request rate, or its share of the waiting requests"},
    503: {"model": OpenAIErrorBody, "description": "no compute worker answered in time (or one failed); retry later",
          "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}}},
})
async def create_embeddings(ctx: Context, body: EmbeddingsBody, request: Request, principal: Caller,
                            _strict: None = strict_body(EmbeddingsBody)) -> JSONResponse:
    """One vector per input, computed by a compute worker between two steps of its batch work,
    equal to what an embed job with the same model, ``dimensions`` and ``long_documents`` writes.
    A per-input failure (say ``document_too_long``) is a 400 naming the input (``param`` ``input.3``)."""
    access: LaneAccess = request.app.state.lane
    tenant = principal.tenant
    if access.waiting.available_tokens < 1:
        raise _unavailable("this API process has too many embeddings requests waiting for a worker")
    if access.waiting_by_tenant[tenant] >= access.settings.lane.waiting_per_tenant:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                            f"tenant {tenant!r} has {access.waiting_by_tenant[tenant]} embeddings requests waiting for a "
                            f"worker in this API process, the most one tenant may; try again in {RETRY_AFTER_S} s",
                            headers={"Retry-After": str(RETRY_AFTER_S)})
    access.waiting_by_tenant[tenant] += 1
    try:
        return await anyio.to_thread.run_sync(_answer, ctx, body, access, limiter=access.waiting)
    finally:
        access.waiting_by_tenant[tenant] -= 1
        if not access.waiting_by_tenant[tenant]:
            del access.waiting_by_tenant[tenant]


def _answer(ctx: JobContext, body: EmbeddingsBody, access: LaneAccess) -> JSONResponse:
    settings = access.settings
    request = EmbeddingRequest(model=body.model, inputs=body.input, dimensions=body.dimensions,
                               long_documents=body.long_documents, prompt_name=body.prompt_name, prompt=body.prompt)
    try:
        # the checks of a job submission (model, task, dimensions, policy); a Hub model pinned to its commit
        valid = validate_spec(ctx, request.job_spec())
        request = request.model_copy(update={"model": valid.spec.model})
    except JobRejected as exc:
        where = _FIELDS.get(exc.field, tuple(exc.field.split(".")))
        # its type is OpenAI's `code`: what is wrong (invalid_model, invalid_dimensions), not pydantic's value_error
        raise RequestValidationError([{"loc": ("body", *where), "type": f"invalid_{where[0]}", "msg": str(exc)}]) from None
    check_limits(body.input, settings, valid.prompt)  # the prompt goes before every input: each costs it too
    try:
        reply = access.lane.call(request, settings.lane.embeddings_timeout_s)
    except LaneTimeout:
        raise _unavailable(f"no compute worker answered within {settings.lane.embeddings_timeout_s:g} s") from None
    if reply.failure is not None:
        log.error("POST /v1/embeddings: the worker failed: %s", reply.failure)
        raise _unavailable("the compute worker failed to embed the request")
    if reply.errors:
        raise RequestValidationError([{"loc": ("body", "input", error.index), "type": error.code,
                                       "msg": f"input {error.index}: {error.message}"} for error in reply.errors])
    return JSONResponse(embedding_list(reply, body.model, body.encoding_format),
                        headers={"X-Poolq-Engine": reply.engine})  # model files and dtype, as a job's manifest names them

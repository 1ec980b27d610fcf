"""``GET /v1/models``: what this deployment serves, in OpenAI's list shape, so OpenAI-compatible tools
(the openai client's ``models.list()``, LangChain, LlamaIndex) discover it (jobs/served_models.py)."""
from __future__ import annotations

import anyio
from fastapi import APIRouter

from poolq.api.server.dependencies import Caller, Context
from poolq.api.server.openai_errors import OPENAI_AUTH_RESPONSES
from poolq.jobs.served_models import served_models
from poolq.jobs.spec.served_model import ModelList

router = APIRouter(prefix="/v1/models", tags=["models"], responses=OPENAI_AUTH_RESPONSES)


@router.get("", response_model=ModelList)
async def list_models(ctx: Context, principal: Caller) -> ModelList:
    """Every model a job, a batch line or ``/v1/embeddings`` may name here: packaged and configured
    names, the Hub ids the operator allows that this host has pulled, and models a worker has loaded;
    each with its tasks, dimensions (and the Matryoshka sizes it declares), window, pooling, prompts and
    whether a worker has it loaded."""
    return await anyio.to_thread.run_sync(served_models, ctx)  # reads model files: off the event loop

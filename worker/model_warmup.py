"""A compute worker's pool child loads its models as soon as it starts, in a thread of its own,
instead of inside its first shard or its first interactive request, and runs each once.

Without it, the first shard pays the model load inside its time limit, and the first
``/v1/embeddings`` request a cold worker takes can run past the API's deadline. The models are
``POOLQ_WARM_MODELS`` (comma-separated), else the default model. Each goes through the child's
``EnginePool`` (one load per model, whoever asks first), so a shard or a lane request arriving
meanwhile waits for this load instead of starting a second one; then one short forward of the
model's first task runs, so that what compiles or allocates on a first call (kernels, the
allocator's blocks) is done before a request waits for it. A model that cannot load is only logged
here: the shard that needs it reports the error to its job.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from poolq.jobs.context import JobContext
from poolq.jobs.engine_pool import EnginePool
from poolq.jobs.settings import Settings

log = logging.getLogger(__name__)

WARM_UP_TEXT = "warm-up"


def models_to_warm(settings: Settings) -> list[str]:
    """``warm_models`` (comma-separated, in order, each once), else the default model."""
    named = [name.strip() for name in settings.serving.warm_models.split(",") if name.strip()]
    return list(dict.fromkeys(named)) or [settings.serving.default_model]


def warm_models(context: Callable[[], JobContext]) -> threading.Thread:
    """Start loading and running the context's warm-up models in a daemon thread; returns the thread."""

    def warm() -> None:
        ctx = context()
        for model in models_to_warm(ctx.settings):
            _warm(ctx.engines, model)

    thread = threading.Thread(target=warm, name="poolq-model-warmup", daemon=True)
    thread.start()
    return thread


def _warm(engines: EnginePool, model: str) -> None:
    try:
        # Under the name jobs record (a Hub id pinned to its commit): the engine a shard asks for, and the
        # model this worker reports it holds (model-affinity routing).
        engine = engines.get(engines.registry.canonical(model))
        with engines.in_use(engine):
            engine.encode([WARM_UP_TEXT], task=engine.supported_tasks[0])
    except Exception:  # noqa: BLE001 - the shard that needs the model fails with the real error
        log.exception("worker start: warming model %s failed", model)
        return
    log.info("worker start: model %s loaded and run once", model)

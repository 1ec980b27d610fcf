"""A compute worker's pool child loads the default model as soon as it starts, in a thread of its
own, instead of inside its first shard or its first interactive request.

Without it, the first shard pays the model load inside its time limit, and the first
``/v1/embeddings`` request a cold worker takes can run past the API's deadline. The load goes
through the child's ``EnginePool`` (one load per model, whoever asks first), so a shard or a lane
request arriving meanwhile waits for this load instead of starting a second one. A model that
cannot load is only logged here: the shard that needs it reports the error to its job.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from poolq.jobs.context import JobContext

log = logging.getLogger(__name__)


def warm_default_model(context: Callable[[], JobContext]) -> threading.Thread:
    """Start loading the context's default model in a daemon thread; returns the thread."""

    def load() -> None:
        ctx = context()
        model = ctx.settings.default_model
        try:
            ctx.engines.get(model)
        except Exception:  # noqa: BLE001 - the shard that needs the model fails with the real error
            log.exception("worker start: loading the default model %s failed", model)
            return
        log.info("worker start: model %s loaded", model)

    thread = threading.Thread(target=load, name="poolq-model-warmup", daemon=True)
    thread.start()
    return thread

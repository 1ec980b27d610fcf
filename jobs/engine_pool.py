"""The engines a worker process serves: each model loaded once, on first use, and kept."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from poolq.engine import EngineConfig, ModelRegistry

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class ModelsNotServedHere(RuntimeError):
    """A process that serves no model (a control worker, the API) was asked for an engine."""


class EnginePool:
    """Loaded engines by model name, their identities, and the models this process refused to serve.
    ``loads_models=False`` (a control worker: planning, finalizing, the reconciler): asking for an
    engine is a bug, refused rather than paying a model's memory and load time."""

    def __init__(self, registry: ModelRegistry, config: EngineConfig, loads_models: bool = True) -> None:
        self.registry = registry
        self.config = config
        self.loads_models = loads_models
        self._engines: dict[str, "PoolingEngine"] = {}
        self._identities: dict[str, str] = {}
        # model -> why it cannot be served here: a verdict of the model's own (int8's quality gate),
        # kept so that every later shard fails at once instead of loading and calibrating again
        self._refusals: dict[str, ValueError] = {}
        self._loading_lock = threading.Lock()  # one load per model, however many threads ask at once

    @property
    def loaded(self) -> frozenset[str]:
        """The models this process has loaded (or been handed) so far."""
        return frozenset(self._engines)

    def use(self, model: str, engine: "PoolingEngine") -> None:
        """Serve ``model`` with an engine loaded elsewhere (tests and embedding callers share one)."""
        self._engines[model] = engine

    def get(self, model: str) -> "PoolingEngine":
        """The loaded engine for ``model``; loaded once per process, on first use. A model this
        process refused to serve (``Int8Refused``) is refused again without loading it."""
        with self._loading_lock:
            if model in self._refusals:
                refused = self._refusals[model]
                raise type(refused)(*refused.args)  # a new one: re-raising one instance grows its traceback
            if model not in self._engines:
                if not self.loads_models:
                    raise ModelsNotServedHere(f"this process serves no model (a control worker); {model!r} is loaded by "
                                              "compute workers, which consume the gpu queue")
                self._engines[model] = self._load(model)
            return self._engines[model]

    def _load(self, model: str) -> "PoolingEngine":
        from poolq.engine import PoolingEngine
        from poolq.engine.models.int8_encoder import Int8Refused

        try:
            return PoolingEngine.from_pretrained(model, config=self.config, registry=self.registry)
        except Int8Refused as refused:
            self._refusals[model] = refused
            raise

    def identity(self, model: str) -> str:
        """What makes ``model``'s vectors here: its files' fingerprint and the compute dtype
        (``sha256:…/float32``). Taken once per process, like the engine it describes."""
        if model not in self._identities:
            self._identities[model] = f"{self.registry.fingerprint(model)}/{self.config.dtype}"
        return self._identities[model]

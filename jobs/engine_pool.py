"""The engines a worker process serves: each (model, compute dtype) loaded once, on first use, and kept."""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from poolq.engine import EngineConfig, ModelRegistry
from poolq.engine.hardware import resolve_dtype
from poolq.jobs.model.engine_identity import EngineIdentity, device_kind

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine


class ModelsNotServedHere(RuntimeError):
    """A process that serves no model (a control worker, the API) was asked for an engine."""


class EnginePool:
    """Loaded engines by model name and compute dtype, their identities, and the models this process
    refused to serve. ``config.dtype`` is this worker's own dtype (Settings.dtype, ``auto`` resolved);
    a job that pins another one gets an engine of its own in that dtype, loaded beside it.
    ``loads_models=False`` (a control worker: planning, finalizing, the reconciler): asking for an
    engine is a bug, refused rather than paying a model's memory and load time."""

    def __init__(self, registry: ModelRegistry, config: EngineConfig, loads_models: bool = True) -> None:
        self.registry = registry
        self.config = config
        self.loads_models = loads_models
        self._engines: dict[tuple[str, str], "PoolingEngine"] = {}
        self._identities: dict[tuple[str, str], EngineIdentity] = {}
        # model -> why it cannot be served here: a verdict of the model's own (int8's quality gate),
        # kept so that every later shard fails at once instead of loading and calibrating again
        self._refusals: dict[tuple[str, str], ValueError] = {}
        self._loading_lock = threading.Lock()  # one load per model, however many threads ask at once

    @property
    def loaded(self) -> frozenset[str]:
        """The models this process has loaded (or been handed) so far."""
        return frozenset(model for model, _ in self._engines)

    def dtype_for(self, requested: str | None = None) -> str:
        """The dtype an engine for ``requested`` computes in: this worker's own for None or ``auto``."""
        if requested is None or requested == "auto":
            return resolve_dtype(self.config.dtype, self.config.device)
        return requested

    def use(self, model: str, engine: "PoolingEngine") -> None:
        """Serve ``model`` in ``engine``'s dtype with an engine loaded elsewhere (tests and embedding
        callers share one)."""
        self._engines[(model, engine.config.dtype)] = engine

    def get(self, model: str, dtype: str | None = None) -> "PoolingEngine":
        """The loaded engine for ``model`` in ``dtype`` (default: this worker's); loaded once per
        process, on first use. One this process refused to serve (``Int8Refused``) is refused again
        without loading it."""
        key = (model, self.dtype_for(dtype))
        with self._loading_lock:
            if key in self._refusals:
                refused = self._refusals[key]
                raise type(refused)(*refused.args)  # a new one: re-raising one instance grows its traceback
            if key not in self._engines:
                if not self.loads_models:
                    raise ModelsNotServedHere(f"this process serves no model (a control worker); {model!r} is loaded by "
                                              "compute workers, which consume the gpu queue")
                self._engines[key] = self._load(*key)
            return self._engines[key]

    def _load(self, model: str, dtype: str) -> "PoolingEngine":
        from poolq.engine import PoolingEngine
        from poolq.engine.models.int8_encoder import Int8Refused

        try:
            return PoolingEngine.from_pretrained(model, config=replace(self.config, dtype=dtype), registry=self.registry)
        except Int8Refused as refused:
            self._refusals[(model, dtype)] = refused
            raise

    def engine_identity(self, model: str, dtype: str | None = None) -> EngineIdentity:
        """What makes ``model``'s vectors here in ``dtype``: its files' fingerprint, the dtype, its
        pooling and this device's kind. Taken once per process, like the engine it describes."""
        key = (model, self.dtype_for(dtype))
        if key not in self._identities:
            spec = self.registry.spec(model)
            self._identities[key] = EngineIdentity(
                model=model, revision=self.registry.fingerprint(model), dtype=key[1],
                pooling=spec.pooling.value, head=spec.kind.value, device=device_kind(self.config.device))
        return self._identities[key]

    def identity(self, model: str, dtype: str | None = None) -> str:
        """The short form: the files' fingerprint and the compute dtype (``sha256:…/float32``)."""
        return self.engine_identity(model, dtype).key

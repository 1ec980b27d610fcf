"""The engines a worker process serves: each (model, compute dtype) loaded on first use, and kept
while a memory budget allows (least recently used first out); what it did with each, in
:class:`EngineStats` (for the worker registry and metrics to show)."""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator

from poolq.engine import EngineConfig, ModelRegistry
from poolq.engine.device.hardware import resolve_dtype
from poolq.jobs.spec.engine_identity import EngineIdentity, device_kind

if TYPE_CHECKING:
    from poolq.engine import PoolingEngine

log = logging.getLogger(__name__)

_Key = tuple[str, str]  # (model, compute dtype)


@dataclass(frozen=True)
class EngineStats:
    """What the pool did with one (model, dtype) engine in this process (``EnginePool.stats``)."""

    model: str
    dtype: str
    loads: int  # times it was loaded (again after an eviction)
    evictions: int  # times it was unloaded to make room for another
    load_seconds: float  # over all its loads
    resident_bytes: int  # its weights' and buffers' bytes, as measured at its last load (0: never loaded here)
    loaded: bool  # in the pool now
    in_use: int  # runs holding it now (EnginePool.in_use)


@dataclass
class _Tally:
    """The running counts behind one :class:`EngineStats` (changed under the pool's lock)."""

    loads: int = 0
    evictions: int = 0
    load_seconds: float = 0.0
    resident_bytes: int = 0

    def loaded(self, seconds: float, resident_bytes: int) -> None:
        self.loads += 1
        self.load_seconds += seconds
        self.resident_bytes = resident_bytes

    def record(self, model: str, dtype: str, loaded: bool, in_use: int) -> EngineStats:
        return EngineStats(model, dtype, self.loads, self.evictions, self.load_seconds, self.resident_bytes, loaded, in_use)


class ModelsNotServedHere(RuntimeError):
    """A process that serves no model (a control worker, the API) was asked for an engine."""


class EnginePool:
    """Loaded engines by model name and compute dtype, their identities, and the models this process
    refused to serve. ``config.dtype`` is this worker's own dtype (Settings.serving.dtype, ``auto`` resolved);
    a job that pins another one gets an engine of its own in that dtype, loaded beside it.
    ``loads_models=False`` (a control worker: planning, finalizing, the reconciler): asking for an
    engine is a bug, refused rather than paying a model's memory and load time.

    ``memory_budget`` (bytes, Settings.serving.worker_model_memory; None: no bound): before a model loads, the
    least recently used engines are unloaded until it fits (its size as measured at an earlier load,
    else its weight files'), and again after, by its measured size. An engine a run holds
    (:meth:`in_use`: a shard's, the lane's on its thread) is never unloaded, nor one handed in by
    :meth:`use`; a model larger than the budget on its own still loads, with a warning."""

    def __init__(self, registry: ModelRegistry, config: EngineConfig, loads_models: bool = True,
                 memory_budget: int | None = None) -> None:
        self.registry = registry
        self.config = config
        self.loads_models = loads_models
        self.memory_budget = memory_budget
        self._engines: OrderedDict[_Key, "PoolingEngine"] = OrderedDict()  # least recently used first
        self._handed_in: set[_Key] = set()  # by use(): not this pool's to unload (it could not load them again)
        self._identities: dict[_Key, EngineIdentity] = {}
        # model -> why it cannot be served here: a verdict of the model's own (int8's quality gate),
        # kept so that every later shard fails at once instead of loading and calibrating again
        self._refusals: dict[_Key, ValueError] = {}
        self._tallies: dict[_Key, _Tally] = {}
        self._holds: Counter[int] = Counter()  # id(engine) -> runs holding it
        self._loading_lock = threading.Lock()  # one load per model, however many threads ask at once
        self._holds_lock = threading.Lock()  # held briefly: never across a load

    @property
    def loaded(self) -> frozenset[str]:
        """The models this process holds loaded (or was handed) now."""
        return frozenset(model for model, _ in self._engines)

    def dtype_for(self, requested: str | None = None) -> str:
        """The dtype an engine for ``requested`` computes in: this worker's own for None or ``auto``."""
        if requested is None or requested == "auto":
            return resolve_dtype(self.config.dtype, self.config.device)
        return requested

    def use(self, model: str, engine: "PoolingEngine") -> None:
        """Serve ``model`` in ``engine``'s dtype with an engine loaded elsewhere (tests and embedding
        callers share one); it is outside the memory budget and never unloaded."""
        key = (model, engine.config.dtype)
        self._engines[key] = engine
        self._handed_in.add(key)

    def get(self, model: str, dtype: str | None = None) -> "PoolingEngine":
        """The engine for ``model`` in ``dtype`` (default: this worker's), loaded on first use (and
        again after an eviction). One this process refused to serve (``Int8Refused``) is refused again
        without loading it. Hold it with :meth:`in_use` while it runs."""
        key = (model, self.dtype_for(dtype))
        with self._loading_lock:
            if key in self._refusals:
                refused = self._refusals[key]
                raise type(refused)(*refused.args)  # a new one: re-raising one instance grows its traceback
            if key not in self._engines:
                if not self.loads_models:
                    raise ModelsNotServedHere(f"this process serves no model (a control worker); {model!r} is loaded by "
                                              "compute workers, which consume the gpu queue")
                self._load(key)
            self._engines.move_to_end(key)
            return self._engines[key]

    @contextmanager
    def in_use(self, engine: "PoolingEngine") -> Iterator["PoolingEngine"]:
        """Hold ``engine`` for a run: no load unloads it meanwhile (its memory stays counted)."""
        with self._holds_lock:
            self._holds[id(engine)] += 1
        try:
            yield engine
        finally:
            with self._holds_lock:
                self._holds[id(engine)] -= 1
                if not self._holds[id(engine)]:
                    del self._holds[id(engine)]

    def stats(self) -> tuple[EngineStats, ...]:
        """Each (model, dtype) this pool loaded: its loads, evictions, load seconds and resident bytes."""
        return tuple(tally.record(model, dtype, (model, dtype) in self._engines, self._holders((model, dtype)))
                     for (model, dtype), tally in sorted(self._tallies.items()))

    def _load(self, key: _Key) -> None:
        from poolq.engine import PoolingEngine
        from poolq.engine.loading.resident_memory import resident_bytes
        from poolq.engine.models.int8_encoder import Int8Refused

        model, dtype = key
        self._make_room(key, before_load=True)
        started = time.monotonic()
        try:
            engine = PoolingEngine.from_pretrained(model, config=replace(self.config, dtype=dtype), registry=self.registry)
        except Int8Refused as refused:
            self._refusals[key] = refused
            raise
        tally = self._tallies.setdefault(key, _Tally())
        tally.loaded(time.monotonic() - started, resident_bytes(engine.loaded))
        self._engines[key] = engine
        self._make_room(key, before_load=False)
        if self.memory_budget is not None and self._resident_bytes() > self.memory_budget:
            log.warning("model %s (%s, %d bytes) loaded past the worker's model memory (%d bytes): the engines "
                        "beside it are in use, or it is larger than the budget on its own (in memory now: %d bytes)",
                        model, dtype, tally.resident_bytes, self.memory_budget, self._resident_bytes())

    def _make_room(self, loading: _Key, before_load: bool) -> None:
        """Unload idle engines, least recently used first, until ``loading`` fits the budget beside the
        rest: before its load by its expected size (as measured at an earlier load here, else its weight
        files'), after it by its measured size (it is counted in the pool then)."""
        from poolq.engine.device.oom import release_cached_memory
        from poolq.engine.loading.resident_memory import checkpoint_bytes

        if self.memory_budget is None:
            return
        measured = self._tallies[loading].resident_bytes if loading in self._tallies else 0
        incoming = (measured or checkpoint_bytes(self.registry.resolve(loading[0]))) if before_load else 0
        evicted = []
        for key in list(self._engines):
            if self._resident_bytes() + incoming <= self.memory_budget:
                break
            if key != loading and key not in self._handed_in and not self._holders(key):
                del self._engines[key]
                self._tallies[key].evictions += 1
                evicted.append(key)
        if evicted:
            gc.collect()  # a model's modules may sit in reference cycles: free them now, not at some later collection
            release_cached_memory()
            log.info("unloaded %s to keep the worker's models within %d bytes",
                     ", ".join(f"{model} ({dtype})" for model, dtype in evicted), self.memory_budget)

    def _resident_bytes(self) -> int:
        return sum(self._tallies[key].resident_bytes for key in self._engines if key not in self._handed_in)

    def _holders(self, key: _Key) -> int:
        """Runs holding the pool's engine for ``key`` now (0 when it holds none)."""
        engine = self._engines.get(key)
        with self._holds_lock:
            return self._holds[id(engine)] if engine is not None else 0

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

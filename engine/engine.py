"""PoolingEngine: the engine's public entry point."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from poolq.engine.config import EngineConfig
from poolq.engine.device.hardware import resolve_dtype
from poolq.engine.engine_loop import EngineLoop
from poolq.engine.loading.hub import HubAccess
from poolq.engine.loading.model_loader import LoadedModel, load_model
from poolq.engine.loading.registry import ModelRegistry
from poolq.engine.long_documents.policy_check import resolve_window
from poolq.engine.pooling.heads.classifier_heads import Calibration
from poolq.engine.request import (
    ChunkRows,
    EngineResult,
    LongDocumentPolicy,
    PooledData,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
)
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.scheduling.scheduler import SchedulingOrder
from poolq.engine.scheduling.step import StepOutput
from poolq.engine.scoring import cosine_scores, maxsim_scores, score_modes
from poolq.engine.turns import EngineTurns


class EmbeddingError(RuntimeError):
    """Raised by the list APIs (``embed``, ``classify``, ``encode``) when any input failed."""


class PoolingEngine:
    """Tokenize, schedule, run and pool: requests in (streaming), results out in input order."""

    def __init__(self, loaded: LoadedModel, config: EngineConfig) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.tokenizer = loaded.tokenizer
        self.runner = loaded.runner
        self.dispatcher = loaded.dispatcher
        # ``auto`` names what the model was loaded in (a config of an engine built on loaded weights)
        self.config = replace(config, dtype=loaded.compute_dtype) if config.dtype == "auto" else config
        self.turns = EngineTurns()  # steps of concurrent runs take turns; urgent runs go first
        # A packed runner pads nothing: steps take windows in arrival order and results flow out in
        # order; a padded runner wants similar lengths side by side.
        packed = isinstance(loaded.runner, PackedRunner)
        self.scheduling_order = SchedulingOrder.ARRIVAL if packed else SchedulingOrder.LONGEST_FIRST

    @classmethod
    def from_pretrained(
        cls,
        path_or_name: str | Path,
        *,
        device: str | None = None,
        dtype: str | None = None,
        config: EngineConfig | None = None,
        registry: ModelRegistry | None = None,
        calibration: Calibration | None = None,
    ) -> "PoolingEngine":
        """Load a local model directory, a name the registry knows, or a Hugging Face Hub id
        (``org/name[@revision]``, through the Hub cache; docs/models.md). The dtype is
        ``dtype``, else ``config.dtype``, else ``auto``: what a worker's ``auto`` picks on this device
        (engine/device/hardware.py: bf16 where the hardware runs it natively, fp16 on older GPUs, else fp32)."""
        config = config or EngineConfig()
        device = device or config.device
        config = replace(config, device=device, dtype=resolve_dtype(dtype or config.dtype, device))
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        # The caller of the engine's own API is its operator: any Hub id may be named (a service passes its
        # registry, with the operator's allow-list).
        registry = registry or ModelRegistry.with_packaged_models(hub_access=HubAccess(allow=("*",)))
        model_dir = registry.resolve(str(path_or_name))
        return cls(load_model(model_dir, config, calibration), config)

    @property
    def dimensions(self) -> int:
        """Size of ``embed`` vectors when a request names no ``dimensions``: after any projector, cut to the
        model's ``truncate_dim`` if it saved one (sentence-transformers' ``get_embedding_dimension``)."""
        return min(self.loaded.output_dim, self.spec.truncate_dim or self.loaded.output_dim)

    @property
    def token_dimensions(self) -> int:
        """Size of ``token_embed`` vectors (BGE-M3: its ColBERT layer's; else as ``embed``'s)."""
        return self.loaded.token_output_dim

    @property
    def supported_tasks(self) -> tuple[PoolingTask, ...]:
        return self.dispatcher.supported_tasks

    # -- list APIs -------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], task: PoolingTask = PoolingTask.EMBED, params: PoolingParams | None = None,
               policy: LongDocumentPolicy | None = None,
               text_pairs: Sequence[str] | None = None) -> list[PooledData | ChunkRows]:
        """One output per text for ``task`` (chunk modes: its chunk rows); raises :class:`EmbeddingError`
        if any text failed."""
        self.dispatcher.check(task)
        params = params or PoolingParams()
        pairs = text_pairs if text_pairs is not None else [None] * len(texts)
        requests = (PoolingRequest(i, t, task, p, params) for i, (t, p) in enumerate(zip(texts, pairs, strict=True)))
        outputs = []
        for result in self.run(requests, policy):
            if isinstance(result, RequestError):
                raise EmbeddingError(f"input {result.key}: {result.code}: {result.message}")
            outputs.append(result.data)
        return outputs

    def embed(self, texts: Sequence[str], *, dimensions: int | None = None, normalize: bool | None = None,
              policy: LongDocumentPolicy | None = None, prompt_name: str | None = None,
              prompt: str | None = None) -> np.ndarray:
        """``[len(texts), dim]`` float32 embeddings; ``prompt_name``/``prompt`` as sentence-transformers'
        ``encode`` takes them (neither: the model's default prompt, if it has one)."""
        params = PoolingParams(dimensions=dimensions, normalize=normalize, prompt_name=prompt_name, prompt=prompt)
        rows = self.encode(texts, PoolingTask.EMBED, params, policy)
        return np.stack(_dense(rows)) if rows else np.zeros((0, dimensions or self.dimensions), dtype=np.float32)

    def classify(self, texts: Sequence[str], *, text_pairs: Sequence[str] | None = None,
                 activation: bool = True, policy: LongDocumentPolicy | None = None) -> np.ndarray:
        """``[len(texts), num_labels]`` class probabilities (or scores, or logits without activation)."""
        rows = self.encode(texts, PoolingTask.CLASSIFY, PoolingParams(activation=activation), policy, text_pairs)
        return np.stack(_dense(rows)) if rows else np.zeros((0, self.spec.num_labels), dtype=np.float32)

    @property
    def score_modes(self) -> list[str]:
        """The pair-scoring modes this model serves, preferred first: ``cross_encoder`` (a 1-label
        classifier on the pair), ``cosine`` (of embeddings), ``maxsim`` (over token embeddings)."""
        return score_modes(self.spec)

    def score(self, texts_a: Sequence[str], texts_b: Sequence[str], *, mode: str = "auto") -> np.ndarray:
        """Pairwise scores of ``texts_a[i]`` with ``texts_b[i]``: ``[n]`` float32.

        ``mode``: one of ``score_modes``, or ``auto`` (the first of them).
        """
        if len(texts_a) != len(texts_b):
            raise ValueError(f"score needs as many first texts as second texts ({len(texts_a)} != {len(texts_b)})")
        mode = self._score_mode(mode)
        if mode == "cross_encoder":
            return self.classify(texts_a, text_pairs=texts_b)[:, 0]
        if mode == "cosine":
            return cosine_scores(self.embed(texts_a, normalize=True), self.embed(texts_b, normalize=True))
        params = PoolingParams(normalize=True)
        return maxsim_scores(_dense(self.encode(texts_a, PoolingTask.TOKEN_EMBED, params)),
                             _dense(self.encode(texts_b, PoolingTask.TOKEN_EMBED, params)))

    def _score_mode(self, mode: str) -> str:
        available = self.score_modes
        if mode == "auto" and available:
            return available[0]
        if mode not in available:
            raise ValueError(f"score mode {mode!r} is not available for this model; "
                             f"available: {', '.join(available) or 'none'}")
        return mode

    # -- streaming API ---------------------------------------------------------------------
    def run(self, requests: Iterable[PoolingRequest], policy: LongDocumentPolicy | None = None, *,
            on_step: Callable[[StepOutput], None] | None = None, urgent: bool = False) -> Iterator[EngineResult]:
        """Stream results in input order; memory is bounded by ``config.lookahead_tokens``.

        The engine works in steps (``engine_loop.py``): a helper thread tokenizes ahead while
        each step runs one batch through the model. ``on_step`` sees every step's report before
        its results are handed out, and may raise to stop the run. ``urgent`` runs get the model
        between two steps of other runs on this engine (the interactive lane).
        """
        return EngineLoop(self.loaded, self.config, self.turns, self.scheduling_order, requests, policy,
                          urgent=urgent).results(on_step)

    def window(self, policy: LongDocumentPolicy) -> int:
        """The window (tokens per model sequence) ``policy`` gives this model."""
        return resolve_window(self.spec, policy)


def _dense(rows: list[PooledData | ChunkRows]) -> list[np.ndarray]:
    """The outputs of a dense task (every task but sparse_embed), typed as the arrays they are."""
    dense = [row for row in rows if isinstance(row, np.ndarray)]
    if len(dense) != len(rows):
        raise TypeError("a dense task returned a sparse vector")
    return dense

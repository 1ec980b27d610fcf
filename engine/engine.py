"""PoolingEngine: the engine's public entry point."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from poolq.engine.config import EngineConfig
from poolq.engine.loading.model_loader import LoadedModel, load_model
from poolq.engine.loading.registry import ModelRegistry
from poolq.engine.long_documents.policy_check import resolve_window
from poolq.engine.long_documents.window_planner import WindowPlanner
from poolq.engine.long_documents.window_plans import DocumentPlan, SinglePlan, Window
from poolq.engine.pooling.classifier_heads import Calibration
from poolq.engine.pooling.dispatcher import UnsupportedTaskError
from poolq.engine.request import (
    ChunkRows,
    EngineResult,
    LongDocumentMode,
    LongDocumentPolicy,
    PooledData,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
)
from poolq.engine.scheduler import Scheduler
from poolq.engine.scoring import cosine_scores, maxsim_scores, score_modes

# Requests tokenized per tokenizer call while filling the lookahead window.
_TOKENIZE_GROUP = 64


@dataclass
class _Window:
    """One lookahead window: its requests, their plans (or errors), and the scheduler holding
    their model sequences; ``owners[i]`` is (request index, window index) of sequence ``i``."""

    scheduler: Scheduler
    requests: list[PoolingRequest] = field(default_factory=list)
    plans: list[DocumentPlan | RequestError] = field(default_factory=list)
    owners: list[tuple[int, int]] = field(default_factory=list)


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
        self.config = config

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
        """Load a local model directory, or a name the registry knows. Never reaches a hub."""
        config = config or EngineConfig()
        config = replace(config, device=device or config.device, dtype=dtype or config.dtype)
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        model_dir = (registry or ModelRegistry.with_packaged_models()).resolve(str(path_or_name))
        return cls(load_model(model_dir, config, calibration), config)

    @property
    def dimensions(self) -> int:
        """Size of ``embed`` vectors (after any projector, before Matryoshka truncation)."""
        return self.loaded.output_dim

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
              policy: LongDocumentPolicy | None = None) -> np.ndarray:
        """``[len(texts), dim]`` float32 embeddings."""
        rows = self.encode(texts, PoolingTask.EMBED, PoolingParams(dimensions=dimensions, normalize=normalize), policy)
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
    def run(self, requests: Iterable[PoolingRequest], policy: LongDocumentPolicy | None = None) -> Iterator[EngineResult]:
        """Stream results in input order; memory is bounded by ``config.lookahead_tokens``.

        While one lookahead window runs through the model, a helper thread tokenizes the
        next (the fast tokenizers release the GIL), so tokenization overlaps compute.
        """
        policy = policy or LongDocumentPolicy()
        planner = WindowPlanner(self.tokenizer, self.spec, policy, self._window(policy), self.dispatcher,
                                self.config.max_chunks_per_document)
        iterator = iter(requests)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="poolq-tokenize") as pool:
            pending = pool.submit(self._collect, iterator, planner)
            while (current := pending.result()).requests:
                pending = pool.submit(self._collect, iterator, planner)
                yield from self._execute(current)

    def _window(self, policy: LongDocumentPolicy) -> int:
        return resolve_window(self.spec, policy)

    def _collect(self, iterator: Iterator[PoolingRequest], planner: WindowPlanner) -> "_Window":
        """Plan and tokenize requests until the lookahead budget is full (or the input ends)."""
        current = _Window(Scheduler(self.config.max_num_batched_tokens, self.config.max_num_seqs))
        while current.scheduler.pending_tokens < self.config.lookahead_tokens:
            group = list(islice(iterator, _TOKENIZE_GROUP))
            if not group:
                break
            for request, plan in zip(group, self._plan(group, planner)):
                if not isinstance(plan, RequestError):
                    for window_index, window in enumerate(plan.windows):
                        current.scheduler.add(len(current.owners), window.token_ids, window.token_type_ids)
                        current.owners.append((len(current.plans), window_index))
                current.requests.append(request)
                current.plans.append(plan)
        return current

    def _execute(self, current: "_Window") -> list[EngineResult]:
        """Run a tokenized window in batches; its results in input order."""
        requests, plans = current.requests, current.plans
        for batch in current.scheduler.drain():
            hidden_states = self.runner.forward(batch)  # [num_tokens, hidden]
            owners = [current.owners[i] for i in batch.seq_indices]
            owner_plans = [_scheduled(plans[r]) for r, _ in owners]
            wants_pooled = [None if plan.wants_states else _pooled_as(requests[r], plan)
                            for plan, (r, _) in zip(owner_plans, owners)]
            pooled = self.dispatcher.forward(hidden_states, batch, wants_pooled)
            for row, (plan, (_, window_index)) in enumerate(zip(owner_plans, owners)):
                start, end = int(batch.cu_seqlens[row]), int(batch.cu_seqlens[row + 1])
                value = hidden_states[start:end] if wants_pooled[row] is None else pooled[row]
                plan.add(window_index, value)
        return [plan if isinstance(plan, RequestError) else plan.output(request.key) for request, plan in zip(requests, plans)]

    def _plan(self, group: list[PoolingRequest], planner: WindowPlanner) -> list[DocumentPlan | RequestError]:
        singles = [r.text for r in group if r.text_pair is None]
        offsets: Sequence[list[tuple[int, int]] | None]
        if planner.policy.mode.chunk_rows or any(task.per_token for request in group for task in request.all_tasks):
            content_ids, offsets = self.tokenizer.tokenize_with_offsets(singles) if singles else ([], [])
        else:
            content_ids, offsets = (self.tokenizer.count_and_tokenize(singles) if singles else []), [None] * len(singles)
        contents = iter(zip(content_ids, offsets))
        plans: list[DocumentPlan | RequestError] = []
        for request in group:
            if request.text_pair is None:
                plan = planner.plan(request, *next(contents))
            else:
                truncate = planner.policy.mode is LongDocumentMode.TRUNCATE
                item = self.tokenizer.tokenize_pair(request.text, request.text_pair, planner.window, truncate)
                if item is None:
                    plans.append(RequestError(request.key, "query_too_long", f"the first text of the pair fills the "
                                              f"model's window of {planner.window} tokens on its own"))
                    continue
                plan = SinglePlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated)
            plans.append(self._check(request, plan, planner))
        return plans

    def _check(
        self, request: PoolingRequest, plan: DocumentPlan | RequestError, planner: WindowPlanner
    ) -> DocumentPlan | RequestError:
        if isinstance(plan, RequestError):
            return plan
        try:
            for task in request.all_tasks:
                self.dispatcher.check(task)
        except UnsupportedTaskError as exc:
            return RequestError(request.key, "unsupported_task", str(exc))
        dims = request.params.dimensions
        sizes = {PoolingTask.EMBED: self.dimensions, PoolingTask.TOKEN_EMBED: self.token_dimensions}
        for task in request.all_tasks:
            if dims is not None and task in sizes and dims > sizes[task]:
                return RequestError(request.key, "invalid_dimensions", f"dimensions={dims} exceeds the model's {sizes[task]}")
        if plan.truncated and planner.policy.mode is LongDocumentMode.ERROR:
            return RequestError(
                request.key,
                "document_too_long",
                f"document has {plan.num_tokens} tokens; the model's window is {planner.window} "
                "(set long_documents.mode to 'truncate', 'chunked', 'naive_chunks' or 'late_chunks')",
            )
        return plan


def _dense(rows: list[PooledData | ChunkRows]) -> list[np.ndarray]:
    """The outputs of a dense task (every task but sparse_embed), typed as the arrays they are."""
    dense = [row for row in rows if isinstance(row, np.ndarray)]
    if len(dense) != len(rows):
        raise TypeError("a dense task returned a sparse vector")
    return dense


def _pooled_as(request: PoolingRequest, plan: DocumentPlan) -> PoolingRequest:
    """The request a window is pooled for: with its plan's params where they differ (chunked classify pools logits)."""
    return request if plan.pool_params is None else replace(request, params=plan.pool_params)


def _scheduled(plan: DocumentPlan | RequestError) -> DocumentPlan:
    """The plan of a scheduled sequence: only planned requests have sequences in the scheduler."""
    if isinstance(plan, RequestError):
        raise RuntimeError(f"request {plan.key} failed planning but has a scheduled sequence")
    return plan

"""PoolingEngine: the engine's public entry point."""
from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from .config import EngineConfig
from .model_spec import ModelSpec, read_model_spec
from .pooling import EmbeddingHead, Pooler, pooling_method
from .registry import ModelRegistry
from .request import (
    EmbedOutput,
    EmbedRequest,
    EngineResult,
    LongDocumentMode,
    LongDocumentPolicy,
    RequestError,
)
from .runner import ModelRunner, torch_dtype
from .scheduler import Scheduler
from .tokenizer import TextTokenizer, TokenizedText

# Requests tokenized per tokenizer call while filling the lookahead window.
_TOKENIZE_GROUP = 64


class EmbeddingError(RuntimeError):
    """Raised by the list API (``embed``) when any text could not be embedded."""


class PoolingEngine:
    """Tokenize, schedule, run and pool: streaming requests in, results out in input order."""

    def __init__(self, spec: ModelSpec, tokenizer: TextTokenizer, runner: ModelRunner, config: EngineConfig) -> None:
        self.spec = spec
        self.tokenizer = tokenizer
        self.runner = runner
        self.config = config
        self.pooler = Pooler(pooling_method(spec.pooling), EmbeddingHead(spec.normalize))

    @classmethod
    def from_pretrained(
        cls,
        path_or_name: str | Path,
        config: EngineConfig | None = None,
        registry: ModelRegistry | None = None,
    ) -> "PoolingEngine":
        """Load a local model directory (or a name the registry knows). Never reaches the hub."""
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # weight-loading bars would garble CLI output and worker logs
        config = config or EngineConfig()
        model_dir = (registry or ModelRegistry.with_packaged_models()).resolve(str(path_or_name))
        spec = read_model_spec(model_dir)
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        device = torch.device(config.device)
        model = AutoModel.from_pretrained(
            str(model_dir), local_files_only=True, dtype=torch_dtype(config.dtype), attn_implementation="sdpa"
        )
        model.eval().to(device)
        tokenizer = TextTokenizer(model_dir)
        return cls(spec, tokenizer, ModelRunner(model, device, tokenizer.pad_token_id), config)

    @property
    def dimensions(self) -> int:
        return self.spec.hidden_size

    def embed(self, texts: list[str], policy: LongDocumentPolicy | None = None) -> np.ndarray:
        """Embeddings of ``texts`` as a ``[len(texts), dim]`` float32 array; raises if any fails."""
        requests = (EmbedRequest(key=i, text=text) for i, text in enumerate(texts))
        rows: list[np.ndarray] = []
        for result in self.run(requests, policy):
            if isinstance(result, RequestError):
                raise EmbeddingError(f"text {result.key}: {result.code}: {result.message}")
            rows.append(result.embedding)
        return np.stack(rows) if rows else np.zeros((0, self.dimensions), dtype=np.float32)

    def run(self, requests: Iterable[EmbedRequest], policy: LongDocumentPolicy | None = None) -> Iterator[EngineResult]:
        """Stream results in input order; memory is bounded by ``config.lookahead_tokens``."""
        policy = policy or LongDocumentPolicy()
        window = self._window(policy)
        iterator = iter(requests)
        while True:
            results = self._run_window(iterator, policy, window)
            if not results:
                return
            yield from results

    def _window(self, policy: LongDocumentPolicy) -> int:
        window = policy.window_tokens or self.spec.window_tokens
        if not 1 <= window <= self.spec.max_position_tokens:
            raise ValueError(f"window_tokens={window} is outside 1..{self.spec.max_position_tokens} for this model")
        return window

    def _run_window(self, iterator: Iterator[EmbedRequest], policy: LongDocumentPolicy, window: int) -> list[EngineResult]:
        """Tokenize up to the lookahead budget, run it in batches, return its results in order."""
        scheduler = Scheduler(self.config.max_num_batched_tokens, self.config.max_num_seqs)
        keys: list = []
        results: list[EngineResult | None] = []
        tokenized: dict[int, TokenizedText] = {}
        while scheduler.pending_tokens < self.config.lookahead_tokens:
            group = list(islice(iterator, _TOKENIZE_GROUP))
            if not group:
                break
            for request, content_ids in zip(group, self.tokenizer.count_and_tokenize([r.text for r in group])):
                index = len(results)
                item = self.tokenizer.finish(content_ids, window, policy.side)
                error = _length_error(request, item, window, policy)
                keys.append(request.key)
                results.append(error)
                if error is None:
                    tokenized[index] = item
                    scheduler.add(index, item.token_ids)
        for batch in scheduler.drain():
            hidden_states = self.runner.forward(batch)  # [num_tokens, hidden]
            cu_seqlens = torch.from_numpy(batch.cu_seqlens).to(hidden_states.device)
            pooled_cpu = self.pooler.forward(hidden_states, cu_seqlens).cpu().numpy()  # [num_seqs, dim]
            for row, index in enumerate(batch.seq_indices):
                item = tokenized[index]
                results[index] = EmbedOutput(
                    keys[index], pooled_cpu[row], item.num_tokens, item.truncated, len(item.token_ids)
                )
        return results  # type: ignore[return-value]


def _length_error(request: EmbedRequest, item: TokenizedText, window: int, policy: LongDocumentPolicy) -> RequestError | None:
    if item.truncated and policy.mode is LongDocumentMode.ERROR:
        return RequestError(
            request.key,
            "document_too_long",
            f"document has {item.num_tokens} tokens; the model's window is {window} "
            "(set long_documents.mode to 'truncate' to embed its first window)",
        )
    return None

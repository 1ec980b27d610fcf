"""Request and result types of the engine's public API. Plain Python and numpy: no torch."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Hashable

import numpy as np


class LongDocumentMode(str, Enum):
    """What to do with a document longer than the model's window."""

    ERROR = "error"  # a per-record error naming the token count and the limit
    TRUNCATE = "truncate"  # keep one window; the output says truncated=True
    CHUNKED = "chunked"  # pool every window, token-weighted mean, renormalize: one vector
    NAIVE_CHUNKS = "naive_chunks"  # embed each chunk on its own: one vector per chunk
    LATE_CHUNKS = "late_chunks"  # one pass over the whole document, then chunk means

    @property
    def chunk_rows(self) -> bool:
        """Whether the mode yields one row per chunk."""
        return self in (LongDocumentMode.NAIVE_CHUNKS, LongDocumentMode.LATE_CHUNKS)


class ChunkBoundary(str, Enum):
    TOKENS = "tokens"  # every chunk_tokens content tokens
    SENTENCES = "sentences"  # every chunk_sentences sentences
    SPANS = "spans"  # character spans given by the caller


class TruncationSide(str, Enum):
    """Which side of a long document truncation cuts off."""

    END = "end"  # keep the first window
    START = "start"  # keep the last window


@dataclass(frozen=True)
class LongDocumentPolicy:
    """How the engine treats documents longer than the window (``window_tokens`` or the model's).

    ``max_embed_len`` caps the tokens of a document in ``chunked`` mode; ``window_specials``
    re-adds the special tokens to every window (default: on for CLS/LAST pooling, where a
    middle window would otherwise pool an ordinary token). Chunk modes cut chunks by
    ``chunk_by`` (``chunk_tokens`` tokens, by default as many as a window holds with the model's
    special tokens; ``chunk_sentences`` sentences, or the request's ``chunk_spans``); late chunking
    of documents beyond the window steps macro windows by ``window - overlap_tokens`` (default a
    quarter of the window).
    """

    mode: LongDocumentMode = LongDocumentMode.ERROR
    side: TruncationSide = TruncationSide.END
    window_tokens: int | None = None
    max_embed_len: int | None = None
    window_specials: bool | None = None
    chunk_by: ChunkBoundary = ChunkBoundary.TOKENS
    chunk_tokens: int | None = None  # None: what the window holds besides the model's special tokens
    chunk_sentences: int = 3
    overlap_tokens: int | None = None
    allow_any_pooling: bool = False  # late chunking with a non-MEAN model
    # naive_chunks: a chunk longer than the window (a long sentence group, a caller's span) is cut
    # at the window into pieces whose rows say ``split``; False makes it a chunk_too_long error
    split_long_chunks: bool = True

    def __post_init__(self) -> None:
        for name in ("window_tokens", "max_embed_len", "chunk_tokens", "chunk_sentences"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.overlap_tokens is not None and self.overlap_tokens < 0:
            raise ValueError(f"overlap_tokens must be >= 0, got {self.overlap_tokens}")


class PoolingTask(str, Enum):
    """What a request asks of the model (vLLM's pooling tasks)."""

    @property
    def per_token(self) -> bool:
        """One output row per token (each token's id and character offsets come with it)."""
        return self in (PoolingTask.TOKEN_EMBED, PoolingTask.TOKEN_CLASSIFY)

    EMBED = "embed"  # one vector per text
    CLASSIFY = "classify"  # class probabilities (or a score) per text / text pair
    TOKEN_EMBED = "token_embed"  # one vector per token (late interaction)
    TOKEN_CLASSIFY = "token_classify"  # class probabilities per token
    SPARSE_EMBED = "sparse_embed"  # SPLADE: token id -> weight


@dataclass(frozen=True)
class PoolingParams:
    """Per-request options; ``None`` means the model's default."""

    dimensions: int | None = None  # Matryoshka: keep the first N dims, then normalize
    normalize: bool | None = None  # embed / token_embed: L2-normalize the output
    activation: bool = True  # classify / token_classify: apply the model's activation
    step_tag_id: int | None = None  # STEP: keep only positions holding this token id
    returned_token_ids: tuple[int, ...] | None = None  # STEP: keep only these label columns
    # The text put before the text, as sentence-transformers' encode(prompt_name=..., prompt=...):
    # one of the model's named prompts, or a literal text ("" for none, not even the model's default);
    # neither: the model's default prompt, if it has one
    prompt_name: str | None = None
    prompt: str | None = None
    # Set by the engine, not by callers: the leading tokens of each window its pooling leaves out
    # (the prompt's, for a model whose pooling excludes it: sentence-transformers' include_prompt=False)
    skip_tokens: int = 0

    def __post_init__(self) -> None:
        if self.dimensions is not None and self.dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {self.dimensions}")
        if self.prompt is not None and self.prompt_name is not None:
            raise ValueError(f"give a prompt or a prompt_name, not both (got prompt={self.prompt!r}, "
                             f"prompt_name={self.prompt_name!r})")
        if self.skip_tokens < 0:
            raise ValueError(f"skip_tokens must be >= 0, got {self.skip_tokens}")


@dataclass(frozen=True)
class PoolingRequest:
    """One text (or text pair, for cross-encoders) to pool; ``key`` comes back with the result.

    ``chunk_spans`` are caller-given character spans for the chunk modes (``chunk_by=spans``).
    """

    key: Hashable
    text: str
    task: PoolingTask = PoolingTask.EMBED
    text_pair: str | None = None
    params: PoolingParams = field(default_factory=PoolingParams)
    chunk_spans: tuple[tuple[int, int], ...] | None = None
    # More tasks pooled from the same forward pass (BGE-M3: dense, sparse, ColBERT); the output's
    # data is then a MultiOutput holding one result per task
    also: tuple[PoolingTask, ...] = ()
    # The text as the model's token ids (no special tokens): then nothing is tokenized, and
    # ``text`` only names the input in messages (the interactive lane's token-array inputs)
    token_ids: tuple[int, ...] | None = None

    @property
    def all_tasks(self) -> tuple[PoolingTask, ...]:
        return (self.task, *self.also)


@dataclass(frozen=True)
class ChunkSpan:
    """Where a chunk row comes from: token indices into the document's full token sequence
    (special tokens included) and character offsets into its text, both half-open."""

    chunk_index: int
    token_start: int
    token_end: int
    char_start: int
    char_end: int
    split: bool = False  # a piece of a chunk that was longer than the window


@dataclass(frozen=True)
class SparseVector:
    """A sparse embedding: vocabulary ids and their weights, ids ascending."""

    token_ids: np.ndarray  # [nnz] int32
    weights: np.ndarray  # [nnz] float32

    def to_dict(self) -> dict[int, float]:
        return dict(zip(self.token_ids.tolist(), self.weights.tolist()))


@dataclass(frozen=True)
class MultiOutput:
    """The results of one request's tasks (its ``task`` and ``also``), from one forward pass."""

    outputs: dict[PoolingTask, np.ndarray | SparseVector]


PooledData = np.ndarray | SparseVector | MultiOutput  # [dim] | [num_tokens, dim] | sparse | several tasks
# A chunk-row output: [num_chunks, dim] (dense tasks), or one sparse vector per chunk.
ChunkRows = np.ndarray | tuple[SparseVector, ...]


@dataclass(frozen=True)
class PoolingOutput:
    """The result of one request.

    ``data`` is ``[dim]`` for embed/classify, ``[num_tokens, dim]`` for the token tasks, a
    :class:`SparseVector` for sparse_embed; in the chunk modes, one of those per chunk.
    ``num_tokens`` counts the whole input before truncation; ``processed_tokens`` counts what the model actually ran (the usage).
    """

    key: Hashable
    data: PooledData | ChunkRows = field(repr=False)  # chunk modes: ChunkRows
    num_tokens: int
    truncated: bool
    processed_tokens: int
    chunks: tuple[ChunkSpan, ...] | None = None  # chunk modes only, one per row of data
    token_ids: np.ndarray | None = field(default=None, repr=False)  # token tasks: [num_tokens] int32, one per row
    char_offsets: np.ndarray | None = field(default=None, repr=False)  # token tasks: [num_tokens, 2] int32; specials (0, 0)


@dataclass(frozen=True)
class RequestError:
    """A request the engine could not run; the others are unaffected."""

    key: Hashable
    code: str
    message: str


EngineResult = PoolingOutput | RequestError

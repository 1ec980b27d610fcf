"""What one document costs under a long-document policy, without planning its windows: the
tokens the model would run, the rows it would make, and whether it would be cut, split or
refused. The window planner's arithmetic (``window_planner.py``) on token counts alone, with
no torch and no token ids, so an estimate can price a sample of documents anywhere.

``tests/engine/long_documents/test_document_cost.py`` holds this to the planner itself: the
same tokens, rows, cuts and error codes for every mode over a range of lengths.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from poolq.engine.long_documents.chunking import (
    ChunkingError,
    balanced_pieces,
    char_spans_to_token_chunks,
    sentence_char_spans,
    token_chunks,
)
from poolq.engine.long_documents.policy_check import default_overlap, resolve_window
from poolq.engine.model_spec import ModelSpec, PoolingType
from poolq.engine.request import ChunkBoundary, LongDocumentMode, LongDocumentPolicy


@dataclass(frozen=True)
class DocumentCost:
    """One document's bill. ``error``: the per-record error code it would get (then it makes no
    rows and its tokens are not counted as usage, as a job counts them)."""

    num_tokens: int  # the whole document, special tokens included
    processed_tokens: int = 0  # what the model runs (a job's usage)
    rows: int = 0  # output rows: 1, or one per chunk in the chunk modes
    truncated: bool = False
    windows: int = 0  # model sequences: more than one means the document was chunked or split
    chunk_lengths: tuple[int, ...] = ()  # chunk modes: each row's tokens (content, without specials)
    split_chunks: int = 0  # naive_chunks: rows that are pieces of a chunk longer than the window
    error: str | None = None


@dataclass(frozen=True)
class CostModel:
    """The planner's arithmetic for one model and policy: ``prefix``/``suffix`` special tokens
    around every sequence, ``window`` tokens at most in one, ``max_chunks`` rows per document."""

    policy: LongDocumentPolicy
    window: int
    prefix: int
    suffix: int
    window_specials: bool = True
    max_chunks: int | None = None
    per_token: bool = False  # a token task (token_embed, token_classify): one row, every token kept

    @classmethod
    def of(cls, spec: ModelSpec, policy: LongDocumentPolicy, special_tokens: tuple[int, int],
           max_chunks: int | None = None, per_token: bool = False) -> "CostModel":
        """The cost model of ``spec`` under ``policy``, as the planner resolves its window and
        special tokens (``special_tokens``: the tokenizer's counts before and after a text)."""
        specials = spec.pooling in (PoolingType.CLS, PoolingType.LAST)
        return cls(policy, resolve_window(spec, policy), *special_tokens,
                   window_specials=specials if policy.window_specials is None else policy.window_specials,
                   max_chunks=max_chunks, per_token=per_token)

    @property
    def room(self) -> int:
        return self.window - self.prefix - self.suffix

    @property
    def needs_offsets(self) -> bool:
        """Whether chunks follow characters (sentences, spans): then token offsets are needed."""
        return self.policy.mode.chunk_rows and not self.per_token and self.policy.chunk_by is not ChunkBoundary.TOKENS

    def cost(self, content_tokens: int, text: str = "", offsets: Sequence[tuple[int, int]] | None = None,
             chunk_spans: Sequence[tuple[int, int]] | None = None) -> DocumentCost:
        """The cost of a document of ``content_tokens`` tokens (no specials); ``text`` and its
        token ``offsets`` only where chunks follow characters (``needs_offsets``)."""
        num_tokens = content_tokens + self.prefix + self.suffix
        mode = self.policy.mode
        if content_tokens == 0:
            return DocumentCost(num_tokens, error="empty_after_tokenization")
        if self.per_token:
            return self._tokens(content_tokens, num_tokens)
        if mode in (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE):
            return self._single(num_tokens)
        if mode is LongDocumentMode.CHUNKED:
            return self._chunked(content_tokens, num_tokens)
        try:
            chunks = self._content_chunks(content_tokens, text, offsets, chunk_spans)
        except ChunkingError:
            return DocumentCost(num_tokens, error="invalid_chunks")
        if self.max_chunks is not None and len(chunks) > self.max_chunks:
            return DocumentCost(num_tokens, error="too_many_chunks")
        if mode is LongDocumentMode.NAIVE_CHUNKS:
            return self._naive(chunks, num_tokens)
        windows = self._macro_windows(num_tokens)
        return DocumentCost(num_tokens, sum(windows), len(chunks), windows=len(windows),
                            chunk_lengths=tuple(end - start for start, end in chunks))

    def _single(self, num_tokens: int) -> DocumentCost:
        truncated = num_tokens > self.window
        if truncated and self.policy.mode is LongDocumentMode.ERROR:
            return DocumentCost(num_tokens, truncated=True, error="document_too_long")
        return DocumentCost(num_tokens, min(num_tokens, self.window), 1, truncated, windows=1)

    def _tokens(self, content_tokens: int, num_tokens: int) -> DocumentCost:
        if self.policy.mode is not LongDocumentMode.CHUNKED:
            return self._single(num_tokens)
        limit = self.policy.max_embed_len
        if limit is not None and num_tokens > limit:
            return DocumentCost(num_tokens, error="document_too_long")
        windows = self._macro_windows(num_tokens)
        return DocumentCost(num_tokens, sum(windows), 1, windows=len(windows))

    def _chunked(self, content_tokens: int, num_tokens: int) -> DocumentCost:
        limit = self.policy.max_embed_len
        if limit is not None and num_tokens > limit:
            return DocumentCost(num_tokens, error="document_too_long")
        if self.window_specials:
            pieces = -(-content_tokens // self.room)
            return DocumentCost(num_tokens, content_tokens + pieces * (self.prefix + self.suffix), 1, windows=pieces)
        return DocumentCost(num_tokens, num_tokens, 1, windows=-(-num_tokens // self.window))

    def _content_chunks(self, content_tokens: int, text: str, offsets: Sequence[tuple[int, int]] | None,
                        chunk_spans: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
        by = self.policy.chunk_by
        if by is ChunkBoundary.TOKENS:
            return token_chunks(content_tokens, self.policy.chunk_tokens or self.room)
        if offsets is None:
            raise ValueError(f"chunk_by={by.value!r} needs the document's token offsets")
        if by is ChunkBoundary.SENTENCES:  # poolq's own spans: one holding no token is left out
            return char_spans_to_token_chunks(offsets, sentence_char_spans(text, self.policy.chunk_sentences), len(text),
                                              drop_empty=True)
        if chunk_spans is None:
            raise ChunkingError("chunk_by='spans' needs chunk spans for every document")
        return char_spans_to_token_chunks(offsets, list(chunk_spans), len(text))

    def _naive(self, chunks: list[tuple[int, int]], num_tokens: int) -> DocumentCost:
        room = self.room
        if not self.policy.split_long_chunks and any(end - start > room for start, end in chunks):
            return DocumentCost(num_tokens, error="chunk_too_long")
        lengths: list[int] = []
        split = 0
        for start, end in chunks:
            pieces = balanced_pieces(start, end, room) if end - start > room else [(start, end)]
            lengths += [piece_end - piece_start for piece_start, piece_end in pieces]
            split += len(pieces) if len(pieces) > 1 else 0
        if self.max_chunks is not None and len(lengths) > self.max_chunks:  # each piece is a row of its own
            return DocumentCost(num_tokens, error="too_many_chunks")
        specials = self.prefix + self.suffix
        return DocumentCost(num_tokens, sum(lengths) + specials * len(lengths), len(lengths), windows=len(lengths),
                            chunk_lengths=tuple(lengths), split_chunks=split)

    def _macro_windows(self, num_tokens: int) -> list[int]:
        """Each macro window's length (late chunking, stitched token tasks), as the planner steps them."""
        if num_tokens <= self.window:
            return [num_tokens]
        # An overlap of a whole window would never step (check_policy refuses it for late chunks,
        # not for a token task's stitched windows): price it as one token a step, never loop forever.
        step = max(1, self.window - default_overlap(self.policy, self.window))
        lengths, start = [], 0
        while True:
            end = min(start + self.window, num_tokens)
            lengths.append(end - start)
            if end == num_tokens:
                return lengths
            start += step

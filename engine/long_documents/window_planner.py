"""Planning each request by the long-document policy: windows, chunks and their spans."""
# PolicyError is re-exported here: it is what WindowPlanner raises for a policy it cannot follow.
from __future__ import annotations

from poolq.engine.long_documents.chunking import (
    ChunkingError,
    balanced_pieces,
    char_spans_to_token_chunks,
    describe_chunks,
    sentence_char_spans,
    token_chunks,
)
from poolq.engine.long_documents.policy_check import (
    PolicyError,
    check_multi_task_mode,
    check_policy,
    check_task_mode,
    default_overlap,
)
from poolq.engine.long_documents.token_plans import StitchedTokensPlan, TokenPlan
from poolq.engine.long_documents.window_plans import (
    ChunkedPlan,
    DocumentPlan,
    LateChunksPlan,
    NaiveChunksPlan,
    SinglePlan,
    Window,
)
from poolq.engine.model_spec import ModelSpec, PoolingType
from poolq.engine.pooling.dispatcher import PoolerDispatcher
from poolq.engine.request import (
    ChunkBoundary,
    ChunkSpan,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingRequest,
    RequestError,
    TruncationSide,
)
from poolq.engine.tokenizer import TextTokenizer


class WindowPlanner:
    """Turns a request and its content tokens into a :class:`DocumentPlan` (or a per-record error)."""

    def __init__(self, tokenizer: TextTokenizer, spec: ModelSpec, policy: LongDocumentPolicy, window: int,
                 dispatcher: PoolerDispatcher, max_chunks: int | None = None) -> None:
        self.tokenizer, self.spec, self.policy, self.window = tokenizer, spec, policy, window
        self.dispatcher = dispatcher
        self.max_chunks = max_chunks
        self.prefix, self.suffix = tokenizer.special_ids
        specials = spec.pooling in (PoolingType.CLS, PoolingType.LAST)
        self.window_specials = specials if policy.window_specials is None else policy.window_specials
        self.overlap = default_overlap(policy, window)
        self._check_policy()
        # Unset: what one window holds besides the special tokens, so a token chunk is never split
        self.chunk_tokens = policy.chunk_tokens or self.window - len(self.prefix) - len(self.suffix)

    def _check_policy(self) -> None:
        check_policy(self.spec, self.policy)
        if self.window <= len(self.prefix) + len(self.suffix):
            raise PolicyError("window_tokens", f"a window of {self.window} tokens leaves no room next to the special tokens")

    def plan(
        self, request: PoolingRequest, content_ids: list[int], offsets: list[tuple[int, int]] | None
    ) -> DocumentPlan | RequestError:
        mode = self.policy.mode
        if not content_ids:  # embedding the special tokens alone would say nothing about the text
            return RequestError(request.key, "empty_after_tokenization",
                                "the text has no tokens once tokenized (only characters the tokenizer drops, "
                                "such as combining marks, control or zero-width characters)")
        try:
            for task in request.all_tasks:
                check_task_mode(task, mode)
            if request.also:
                check_multi_task_mode(mode)
        except PolicyError as exc:
            return RequestError(request.key, "unsupported_mode", str(exc))
        if any(task.per_token for task in request.all_tasks):
            return self._tokens(request, content_ids, offsets)
        if mode in (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE):
            item = self.tokenizer.finish(content_ids, self.window, self.policy.side)
            return SinglePlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated)
        num_tokens = len(content_ids) + len(self.prefix) + len(self.suffix)
        try:
            if mode is LongDocumentMode.CHUNKED:
                return self._chunked(request, content_ids, num_tokens)
            chunks = self._content_chunks(request, content_ids, offsets)
        except ChunkingError as exc:
            return RequestError(request.key, "invalid_chunks", str(exc))
        if self.max_chunks is not None and len(chunks) > self.max_chunks:
            return RequestError(request.key, "too_many_chunks",
                                f"the document makes {len(chunks)} chunks; at most {self.max_chunks} per document are "
                                "accepted here: raise chunk_tokens or chunk_sentences")
        if mode is LongDocumentMode.NAIVE_CHUNKS:
            return self._naive(request, content_ids, offsets, chunks, num_tokens)
        return self._late(request, content_ids, offsets, chunks, num_tokens)

    # -- chunked: one vector ---------------------------------------------------------------
    def _chunked(self, request: PoolingRequest, content_ids: list[int], num_tokens: int) -> DocumentPlan | RequestError:
        limit = self.policy.max_embed_len
        if limit is not None and num_tokens > limit:
            return RequestError(request.key, "document_too_long",
                                f"document has {num_tokens} tokens; this job accepts at most max_embed_len={limit}")
        if self.window_specials:
            step = self.window - len(self.prefix) - len(self.suffix)
            pieces = [content_ids[i : i + step] for i in range(0, max(len(content_ids), 1), step)]
            windows = [Window([*self.prefix, *piece, *self.suffix]) for piece in pieces]
        else:
            full = [*self.prefix, *content_ids, *self.suffix]
            windows = [Window(full[i : i + self.window]) for i in range(0, len(full), self.window)]
        return ChunkedPlan(windows, num_tokens, combiner=self.dispatcher.window_combiner(request.task, request.params))

    # -- token tasks: one row per token ----------------------------------------------------
    def _tokens(self, request: PoolingRequest, content_ids: list[int], offsets) -> DocumentPlan | RequestError:
        """One row per token the token head keeps (its ``kept_tokens``: all, or all but CLS for ColBERT)."""
        content_offsets = list(offsets) if offsets is not None else [(0, 0)] * len(content_ids)
        prefix, suffix = [(0, 0)] * len(self.prefix), [(0, 0)] * len(self.suffix)
        token_task = next(task for task in request.all_tasks if task.per_token)
        kept = getattr(self.dispatcher.head(token_task), "kept_tokens", slice(None))
        if self.policy.mode is not LongDocumentMode.CHUNKED:
            item = self.tokenizer.finish(content_ids, self.window, self.policy.side)
            cut = len(item.token_ids) - len(prefix) - len(suffix)
            if item.truncated:  # cut where finish() cut the ids
                content_offsets = content_offsets[:cut] if self.policy.side is TruncationSide.END else content_offsets[-cut:]
            char_offsets = [*prefix, *content_offsets, *suffix]
            return TokenPlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated,
                             token_ids=item.token_ids[kept], char_offsets=char_offsets[kept])
        full = [*self.prefix, *content_ids, *self.suffix]
        limit = self.policy.max_embed_len
        if limit is not None and len(full) > limit:
            return RequestError(request.key, "document_too_long",
                                f"document has {len(full)} tokens; this job accepts at most max_embed_len={limit}")
        return StitchedTokensPlan(self._macro_windows(full), len(full), token_ids=full[kept],
                                  char_offsets=[*prefix, *content_offsets, *suffix][kept],
                                  head=self.dispatcher.head(token_task), params=request.params)

    # -- chunk rows --------------------------------------------------------------------------
    def _content_chunks(self, request: PoolingRequest, content_ids: list[int], offsets) -> list[tuple[int, int]]:
        by = self.policy.chunk_by
        if by is ChunkBoundary.TOKENS:
            return token_chunks(len(content_ids), self.chunk_tokens)
        if by is ChunkBoundary.SENTENCES:
            spans = sentence_char_spans(request.text, self.policy.chunk_sentences)
        elif request.chunk_spans is None:
            raise ChunkingError("chunk_by='spans' needs chunk spans for every document")
        else:
            spans = list(request.chunk_spans)
        return char_spans_to_token_chunks(offsets, spans, len(request.text))

    def _spans(self, content_chunks, offsets, first_start: int, last_end: int,
               split: tuple[bool, ...] = ()) -> tuple[ChunkSpan, ...]:
        """Content chunks in full-sequence coordinates; the first/last chunk reach ``first_start``/``last_end``."""
        described = describe_chunks(content_chunks, offsets)
        prefix = len(self.prefix)
        spans = []
        for index, chunk in enumerate(described):
            start = first_start if index == 0 else chunk.token_start + prefix
            end = last_end if index == len(described) - 1 else chunk.token_end + prefix
            spans.append(ChunkSpan(index, start, end, chunk.char_start, chunk.char_end, bool(split and split[index])))
        return tuple(spans)

    def _naive(self, request, content_ids, offsets, chunks, num_tokens) -> DocumentPlan | RequestError:
        room = self.window - len(self.prefix) - len(self.suffix)
        too_long = [(index, end - start) for index, (start, end) in enumerate(chunks) if end - start > room]
        if too_long and not self.policy.split_long_chunks:
            index, length = too_long[0]
            return RequestError(request.key, "chunk_too_long",
                                f"chunk {index} has {length} tokens; a window holds {room} besides its special tokens "
                                "(split_long_chunks cuts such chunks at the window)")
        pieces, split = split_at_window(chunks, room)
        windows = [Window([*self.prefix, *content_ids[s:e], *self.suffix]) for s, e in pieces]
        prefix = len(self.prefix)
        spans = self._spans(pieces, offsets, pieces[0][0] + prefix, pieces[-1][1] + prefix, split)
        return NaiveChunksPlan(windows, num_tokens, chunks=spans)

    def _late(self, request, content_ids, offsets, chunks, num_tokens) -> DocumentPlan:
        full = [*self.prefix, *content_ids, *self.suffix]  # one pass over exactly these tokens
        spans = self._spans(chunks, offsets, 0, len(full))
        return LateChunksPlan(self._macro_windows(full), num_tokens, chunks=spans, head=self.dispatcher.embed_head,
                              params=request.params)

    def _macro_windows(self, full: list[int]) -> list[Window]:
        """Windows of the model's length stepping by window - overlap; every window after the
        first keeps only its states after the overlap, so each token has exactly one state."""
        if len(full) <= self.window:
            return [Window(full)]
        step, windows, start = self.window - self.overlap, [], 0
        while True:
            end = min(start + self.window, len(full))
            windows.append(Window(full[start:end], doc_offset=start, keep_start=0 if start == 0 else self.overlap))
            if end == len(full):
                return windows
            start += step


def split_at_window(chunks: list[tuple[int, int]], room: int) -> tuple[list[tuple[int, int]], tuple[bool, ...]]:
    """Chunks of at most ``room`` tokens: a longer one is cut into the fewest balanced pieces that
    fit (``balanced_pieces``: never a full window and a sliver), each flagged as split."""
    pieces: list[tuple[int, int]] = []
    split: list[bool] = []
    for start, end in chunks:
        cut = end - start > room
        found = balanced_pieces(start, end, room) if cut else [(start, end)]
        pieces += found
        split += [cut] * len(found)
    return pieces, tuple(split)

"""Planning each request by the long-document policy: windows, chunks and their spans.

A prompt (the request's, else the model's default: ``resolve_prompt``) goes before the text as
sentence-transformers puts it: ``prompt + text`` is tokenized as one string. Its tokens then travel
with the special tokens before the text (the request's ``lead``):

* ``error``/``truncate``: one sequence ``[prefix, prompt, text, suffix]``; truncation cuts the text only.
* ``chunked`` and ``naive_chunks``: every window and every chunk is embedded as a text of its own with
  the prompt, ``[prefix, prompt, piece, suffix]`` (a prompt puts the special tokens in every window,
  whatever ``window_specials`` says); the first window is the head of ``prompt + text`` tokenized whole.
* ``late_chunks``: the prompt comes once, before the document, and conditions every chunk's states;
  it belongs to no chunk (the first chunk starts right after it).
* the token tasks: the prompt's tokens are rows like any others, with character offsets ``(0, 0)``.

A model that pools without its prompt (include_prompt=False) has each window pooled from the token
after sentence-transformers' ``prompt_length`` on (``PoolingParams.skip_tokens``). Token counts
include the prompt's tokens: the model runs them.
"""
# PolicyError is re-exported here: it is what WindowPlanner raises for a policy it cannot follow.
from __future__ import annotations

from dataclasses import dataclass, replace

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
from poolq.engine.model_spec import ModelSpec, PoolingType, PromptError, resolve_prompt
from poolq.engine.pooling.dispatcher import PoolerDispatcher
from poolq.engine.pooling.methods import StepPool
from poolq.engine.request import (
    ChunkBoundary,
    ChunkSpan,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
    TruncationSide,
)
from poolq.engine.tokenizer import TextTokenizer


@dataclass(frozen=True)
class _Document:
    """A request's tokens as windows take them: ``lead`` (the special tokens before a text, then the
    prompt's), the text's ``content`` tokens and their ``offsets``; ``pooled_with``: the params its
    windows are pooled with when the pooling leaves the prompt out."""

    lead: list[int]
    content: list[int]
    offsets: list[tuple[int, int]] | None
    prompt_tokens: int = 0
    pooled_with: PoolingParams | None = None

    @property
    def prompt_ids(self) -> list[int]:
        return self.lead[len(self.lead) - self.prompt_tokens:]


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

    def _check_policy(self) -> None:
        check_policy(self.spec, self.policy, special_tokens=len(self.prefix) + len(self.suffix))

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
        try:
            doc = self._document(request, content_ids, offsets)
        except PromptError as exc:
            return RequestError(request.key, "invalid_prompt", str(exc))
        if len(doc.lead) + len(self.suffix) >= self.window:
            return RequestError(request.key, "prompt_too_long",
                                f"the prompt's {doc.prompt_tokens} tokens and the special tokens fill the window of "
                                f"{self.window} tokens, leaving none for the text")
        if any(task.per_token for task in request.all_tasks):
            return self._tokens(request, doc)
        if mode in (LongDocumentMode.ERROR, LongDocumentMode.TRUNCATE):
            item = self.tokenizer.finish(doc.content, self.window, self.policy.side, doc.prompt_ids)
            return SinglePlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated,
                              pooled_with=doc.pooled_with)
        num_tokens = len(doc.content) + len(doc.lead) + len(self.suffix)
        try:
            if mode is LongDocumentMode.CHUNKED:
                return self._chunked(request, doc, num_tokens)
            chunks = self._content_chunks(request, doc)
        except ChunkingError as exc:
            return RequestError(request.key, "invalid_chunks", str(exc))
        if self.max_chunks is not None and len(chunks) > self.max_chunks:
            return RequestError(request.key, "too_many_chunks",
                                f"the document makes {len(chunks)} chunks; at most {self.max_chunks} per document are "
                                "accepted here: raise chunk_tokens or chunk_sentences")
        if mode is LongDocumentMode.NAIVE_CHUNKS:
            return self._naive(request, doc, chunks, num_tokens)
        return self._late(request, doc, chunks, num_tokens)

    def _document(self, request: PoolingRequest, content_ids: list[int], offsets) -> _Document:
        """The request's tokens with its prompt (raises PromptError for a prompt it cannot have)."""
        params = request.params
        prompt = resolve_prompt(self.spec, params.prompt_name, params.prompt)
        if not prompt:
            return _Document(list(self.prefix), content_ids, offsets)
        if request.token_ids is not None:  # given as token ids: the prompt's own tokens go before them
            prompt_ids, offsets = self.tokenizer.prompt_ids(prompt), None
        else:
            prompted = self.tokenizer.prompted(prompt, request.text, content_ids, offsets)
            prompt_ids, content_ids, offsets = prompted.prompt_ids, prompted.content_ids, prompted.offsets
        pooled_with = None
        if not self.spec.include_prompt and request.all_tasks == (PoolingTask.EMBED,):
            pooled_with = replace(params, skip_tokens=self.tokenizer.prompt_length(prompt))
        return _Document([*self.prefix, *prompt_ids], content_ids, offsets, len(prompt_ids), pooled_with)

    def _room(self, doc: _Document) -> int:
        """The text tokens a window holds next to the lead (special tokens, prompt) and the suffix."""
        return self.window - len(doc.lead) - len(self.suffix)

    # -- chunked: one vector ---------------------------------------------------------------
    def _chunked(self, request: PoolingRequest, doc: _Document, num_tokens: int) -> DocumentPlan | RequestError:
        limit = self.policy.max_embed_len
        if limit is not None and num_tokens > limit:
            return RequestError(request.key, "document_too_long",
                                f"document has {num_tokens} tokens; this job accepts at most max_embed_len={limit}")
        content = doc.content
        if self.window_specials or doc.prompt_tokens:
            step = self._room(doc)
            pieces = [content[i : i + step] for i in range(0, max(len(content), 1), step)]
            windows = [Window([*doc.lead, *piece, *self.suffix]) for piece in pieces]
        else:
            full = [*doc.lead, *content, *self.suffix]
            windows = [Window(full[i : i + self.window]) for i in range(0, len(full), self.window)]
        return ChunkedPlan(windows, num_tokens, combiner=self.dispatcher.window_combiner(request.task, request.params),
                           pooled_with=doc.pooled_with)

    # -- token tasks: one row per token ----------------------------------------------------
    def _tokens(self, request: PoolingRequest, doc: _Document) -> DocumentPlan | RequestError:
        """One row per token the token pooler keeps: STEP's step-tag positions (``_step_rows``) or all,
        then those its head keeps (its ``kept_tokens``: all, or all but CLS for ColBERT)."""
        content_offsets = list(doc.offsets) if doc.offsets is not None else [(0, 0)] * len(doc.content)
        lead, suffix = [(0, 0)] * len(doc.lead), [(0, 0)] * len(self.suffix)
        token_task = next(task for task in request.all_tasks if task.per_token)
        kept = getattr(self.dispatcher.head(token_task), "kept_tokens", slice(None))
        if self.policy.mode is not LongDocumentMode.CHUNKED:
            item = self.tokenizer.finish(doc.content, self.window, self.policy.side, doc.prompt_ids)
            cut = len(item.token_ids) - len(lead) - len(suffix)
            if item.truncated:  # cut where finish() cut the ids
                content_offsets = content_offsets[:cut] if self.policy.side is TruncationSide.END else content_offsets[-cut:]
            rows = self._step_rows(request, token_task, item.token_ids)
            return TokenPlan([Window(item.token_ids, item.token_type_ids)], item.num_tokens, item.truncated,
                             token_ids=_pick(item.token_ids, rows)[kept],
                             char_offsets=_pick([*lead, *content_offsets, *suffix], rows)[kept])
        full = [*doc.lead, *doc.content, *self.suffix]
        limit = self.policy.max_embed_len
        if limit is not None and len(full) > limit:
            return RequestError(request.key, "document_too_long",
                                f"document has {len(full)} tokens; this job accepts at most max_embed_len={limit}")
        rows = self._step_rows(request, token_task, full)
        return StitchedTokensPlan(self._macro_windows(full), len(full), token_ids=_pick(full, rows)[kept],
                                  char_offsets=_pick([*lead, *content_offsets, *suffix], rows)[kept],
                                  head=self.dispatcher.head(token_task), params=request.params, rows=rows)

    def _step_rows(self, request: PoolingRequest, task: PoolingTask, token_ids: list[int]) -> list[int] | None:
        """The positions holding the request's ``step_tag_id`` where ``task`` pools by STEP (vLLM's STEP:
        StepPool keeps only those states); None: every position."""
        tag = request.params.step_tag_id
        if tag is None or not isinstance(self.dispatcher.poolers[task].method, StepPool):
            return None
        return [position for position, token_id in enumerate(token_ids) if token_id == tag]

    # -- chunk rows --------------------------------------------------------------------------
    def _content_chunks(self, request: PoolingRequest, doc: _Document) -> list[tuple[int, int]]:
        by = self.policy.chunk_by
        if by is ChunkBoundary.TOKENS:
            # Unset: what one window holds besides the lead and suffix, so a token chunk is never split
            return token_chunks(len(doc.content), self.policy.chunk_tokens or self._room(doc))
        if by is ChunkBoundary.SENTENCES:  # poolq's own spans: one holding no token is left out
            spans = sentence_char_spans(request.text, self.policy.chunk_sentences)
            return char_spans_to_token_chunks(doc.offsets or [], spans, len(request.text), drop_empty=True)
        if request.chunk_spans is None:
            raise ChunkingError("chunk_by='spans' needs chunk spans for every document")
        return char_spans_to_token_chunks(doc.offsets or [], list(request.chunk_spans), len(request.text))

    def _spans(self, content_chunks, doc: _Document, first_start: int, last_end: int,
               split: tuple[bool, ...] = ()) -> tuple[ChunkSpan, ...]:
        """Content chunks in full-sequence coordinates; the first/last chunk reach ``first_start``/``last_end``."""
        offsets = doc.offsets if doc.offsets is not None else [(0, 0)] * len(doc.content)  # given as token ids
        described = describe_chunks(content_chunks, offsets)
        lead = len(doc.lead)
        spans = []
        for index, chunk in enumerate(described):
            start = first_start if index == 0 else chunk.token_start + lead
            end = last_end if index == len(described) - 1 else chunk.token_end + lead
            spans.append(ChunkSpan(index, start, end, chunk.char_start, chunk.char_end, bool(split and split[index])))
        return tuple(spans)

    def _naive(self, request: PoolingRequest, doc: _Document, chunks, num_tokens: int) -> DocumentPlan | RequestError:
        room = self._room(doc)
        too_long = [(index, end - start) for index, (start, end) in enumerate(chunks) if end - start > room]
        if too_long and not self.policy.split_long_chunks:
            index, length = too_long[0]
            return RequestError(request.key, "chunk_too_long",
                                f"chunk {index} has {length} tokens; a window holds {room} besides its special tokens "
                                "(and prompt); split_long_chunks cuts such chunks at the window")
        pieces, split = split_at_window(chunks, room)
        if self.max_chunks is not None and len(pieces) > self.max_chunks:  # each piece is a row of its own
            return RequestError(request.key, "too_many_chunks",
                                f"the document makes {len(pieces)} chunk rows ({len(chunks)} chunks, some cut at the "
                                f"window); at most {self.max_chunks} per document are accepted here: raise chunk_tokens "
                                "or chunk_sentences, or shorten the spans")
        windows = [Window([*doc.lead, *doc.content[s:e], *self.suffix]) for s, e in pieces]
        lead = len(doc.lead)
        spans = self._spans(pieces, doc, pieces[0][0] + lead, pieces[-1][1] + lead, split)
        return NaiveChunksPlan(windows, num_tokens, chunks=spans, pooled_with=doc.pooled_with)

    def _late(self, request: PoolingRequest, doc: _Document, chunks, num_tokens: int) -> DocumentPlan:
        full = [*doc.lead, *doc.content, *self.suffix]  # one pass over exactly these tokens
        # Without a prompt the first chunk takes the special tokens before it; a prompt belongs to no chunk.
        spans = self._spans(chunks, doc, len(doc.lead) if doc.prompt_tokens else 0, len(full))
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


def _pick(values: list, rows: list[int] | None) -> list:
    """``values`` at ``rows`` (None: all)."""
    return list(values) if rows is None else [values[row] for row in rows]


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

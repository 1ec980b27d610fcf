"""Chunk boundaries for the chunk modes: fixed token counts, sentences, or caller-given spans.

Chunks are computed on a document's *content* tokens (no special tokens) as half-open
``(start, end)`` token index pairs; their character spans come from the tokenizer's offsets.
No torch here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")


class ChunkingError(ValueError):
    """Chunk spans that cannot be used (out of range, overlapping, empty)."""


@dataclass(frozen=True)
class ContentChunk:
    """One chunk in content-token coordinates, with the characters it covers."""

    token_start: int
    token_end: int
    char_start: int
    char_end: int


def token_chunks(num_tokens: int, chunk_tokens: int) -> list[tuple[int, int]]:
    """Consecutive, non-overlapping runs of ``chunk_tokens`` tokens covering ``[0, num_tokens)``.

    A last run shorter than a quarter of ``chunk_tokens`` would be a sliver row (a couple of
    tokens saying little): then the last two runs share their tokens evenly instead, each at least
    half of ``chunk_tokens`` and none longer. A document shorter than that is one run, whole."""
    if chunk_tokens < 1:
        raise ChunkingError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    chunks = [(start, min(start + chunk_tokens, num_tokens)) for start in range(0, num_tokens, chunk_tokens)]
    if len(chunks) >= 2 and (chunks[-1][1] - chunks[-1][0]) * 4 < chunk_tokens:
        start = chunks[-2][0]
        middle = start + (num_tokens - start + 1) // 2
        chunks[-2:] = [(start, middle), (middle, num_tokens)]
    return chunks


def balanced_pieces(start: int, end: int, most: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into the fewest pieces of at most ``most`` tokens, as even as can be
    (their lengths differ by one at most), so no piece is a sliver."""
    count = -(-(end - start) // most)
    size, extra = divmod(end - start, count)
    pieces, at = [], start
    for index in range(count):
        length = size + (1 if index < extra else 0)
        pieces.append((at, at + length))
        at += length
    return pieces


def sentence_char_spans(text: str, sentences_per_chunk: int) -> list[tuple[int, int]]:
    """Character spans of groups of ``sentences_per_chunk`` sentences covering the text."""
    if sentences_per_chunk < 1:
        raise ChunkingError(f"chunk_sentences must be >= 1, got {sentences_per_chunk}")
    ends = [match.end() for match in _SENTENCE_END.finditer(text)]
    bounds = [0, *(e for e in ends if e < len(text)), len(text)]
    starts = bounds[:-1][::sentences_per_chunk]
    return [(start, (starts[i + 1] if i + 1 < len(starts) else len(text))) for i, start in enumerate(starts)]


def char_spans_to_token_chunks(
    offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]], text_length: int, *, drop_empty: bool = False
) -> list[tuple[int, int]]:
    """Map character spans to content-token spans: a token belongs to the span holding its first character.

    Spans must lie in ``[0, text_length]``, be non-empty and not overlap; a span holding no
    token start (e.g. only whitespace) is an error naming it, or, with ``drop_empty`` (spans poolq
    cut itself, such as sentences: the caller named none), left out.
    """
    _check_char_spans(spans, text_length)
    chunks = []
    token = 0
    for char_start, char_end in spans:
        while token < len(offsets) and offsets[token][0] < char_start:
            token += 1
        first = token
        while token < len(offsets) and offsets[token][0] < char_end:
            token += 1
        if token == first:
            if drop_empty:
                continue  # e.g. a zero-width space after the last sentence: characters the tokenizer drops
            raise ChunkingError(f"chunk span [{char_start}, {char_end}) holds no token")
        chunks.append((first, token))
    return chunks


def describe_chunks(token_spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]) -> list[ContentChunk]:
    """Attach character spans (first token's start, last token's end) to token spans."""
    return [ContentChunk(s, e, offsets[s][0], offsets[e - 1][1]) for s, e in token_spans]


def _check_char_spans(spans: Sequence[tuple[int, int]], text_length: int) -> None:
    previous_end = 0
    for index, (start, end) in enumerate(spans):
        if not 0 <= start < end <= text_length:
            raise ChunkingError(f"chunk span {index} [{start}, {end}) is empty or outside the text (length {text_length})")
        if start < previous_end:
            raise ChunkingError(f"chunk span {index} [{start}, {end}) overlaps the span before it")
        previous_end = end

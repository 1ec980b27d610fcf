"""The chunk modes' promises: every document ends as the rows its mode promises (sentences poolq cut
itself never fail a document), and the per-document chunk cap bounds the rows a document makes."""
from dataclasses import replace

import pytest

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingRequest, RequestError
from poolq.engine.request import ChunkBoundary


@pytest.mark.parametrize("mode", [LongDocumentMode.NAIVE_CHUNKS, LongDocumentMode.LATE_CHUNKS])
def test_a_text_ending_in_a_character_the_tokenizer_drops_still_gets_its_sentence_rows(minilm_engine, mode):
    # Given sentence chunks, and texts whose last sentence is followed by a zero-width space or a
    # soft hyphen (copied web text ends so): characters the tokenizer drops, after the last sentence end
    policy = LongDocumentPolicy(mode=mode, chunk_by=ChunkBoundary.SENTENCES, chunk_sentences=1)
    texts = ["The first sentence is here. A second one follows. \u200b",
             "The first sentence is here. A second one follows. \u00ad"]
    # When they are embedded
    results = list(minilm_engine.run([PoolingRequest(f"doc{i}", text) for i, text in enumerate(texts)], policy))
    # Then each is its two sentence rows, not an invalid_chunks error: the sentence spans are poolq's own
    # (the caller gave none), so a span holding no token is poolq's to fold away, not the document's fault
    for text, result in zip(texts, results):
        assert not isinstance(result, RequestError), result
        assert [text[c.char_start:c.char_end] for c in result.chunks] == \
               ["The first sentence is here.", "A second one follows."]


def test_the_chunk_cap_bounds_the_rows_a_split_chunk_makes(minilm_engine):
    # Given an engine capped at 3 chunk rows per document, 32-token windows, and one caller span of
    # some 60 tokens (naive_chunks splits it at the window into pieces, each its own row)
    capped = PoolingEngine(minilm_engine.loaded, replace(minilm_engine.config, max_chunks_per_document=3))
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_by=ChunkBoundary.SPANS, window_tokens=32)
    text = " ".join(f"word{i}" for i in range(60))
    (result,) = capped.run([PoolingRequest("doc", text, chunk_spans=((0, len(text)),))], policy)
    # Then it is the too_many_chunks error naming its rows (max_chunks_per_document: "a document making
    # more chunk rows is a per-record error"), not more than 3 rows
    assert isinstance(result, RequestError) and result.code == "too_many_chunks", result
    assert "chunk rows" in result.message

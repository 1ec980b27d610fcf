"""The engine's vectors equal sentence-transformers' for the same model (cosine >= 0.99999)."""
import numpy as np
import pytest

from poolq.engine import (
    EngineConfig,
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingEngine,
    PoolingOutput,
    PoolingRequest,
    RequestError,
    TruncationSide,
)

TRUNCATE = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_sample_corpus_matches_sentence_transformers(minilm_engine, st_minilm, sample_documents):
    # Given real long documents (most beyond the 256-token window) and ST's truncating encode
    texts = [doc["text"] for doc in sample_documents]
    reference = st_minilm.encode(texts, batch_size=16, convert_to_numpy=True)
    # When the engine embeds them with explicit truncation
    vectors = minilm_engine.embed(texts, policy=TRUNCATE)
    # Then every vector matches, and they are unit-norm as the model's Normalize module says
    assert vectors.shape == reference.shape == (len(texts), 384)
    assert _cosines(vectors, reference).min() >= 0.99999
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_results_come_back_in_input_order_across_many_small_batches(st_minilm, sample_documents):
    # A tiny budget and lookahead force many batches and several lookahead windows.
    engine = PoolingEngine.from_pretrained(
        "all-MiniLM-L6-v2", config=EngineConfig(max_num_batched_tokens=600, max_num_seqs=3, lookahead_tokens=1200),
        dtype="float32",
    )
    texts = [doc["text"][: 200 + 37 * i] for i, doc in enumerate(sample_documents[:20])]
    results = list(engine.run((PoolingRequest(f"k{i}", t) for i, t in enumerate(texts)), TRUNCATE))
    assert [r.key for r in results] == [f"k{i}" for i in range(len(texts))]
    vectors = np.stack([r.data for r in results])
    assert _cosines(vectors, st_minilm.encode(texts)).min() >= 0.99999


def test_error_mode_reports_the_token_count_and_limit_and_embeds_the_rest(minilm_engine, sample_documents):
    long_text = max((d["text"] for d in sample_documents), key=len)
    full_count = len(minilm_engine.tokenizer.count_and_tokenize([long_text])[0]) + 2  # + [CLS] [SEP]
    results = list(minilm_engine.run([PoolingRequest("short", "a short text"), PoolingRequest("long", long_text)]))
    assert isinstance(results[0], PoolingOutput) and not results[0].truncated
    assert isinstance(results[1], RequestError)
    assert results[1].code == "document_too_long"
    assert f"document has {full_count} tokens" in results[1].message and "window is 256" in results[1].message


def test_truncation_is_never_silent(minilm_engine, sample_documents):
    long_text = max((d["text"] for d in sample_documents), key=len)
    (result,) = minilm_engine.run([PoolingRequest("long", long_text)], TRUNCATE)
    assert result.truncated is True
    assert result.num_tokens > 256 and result.processed_tokens == 256


def test_truncating_the_start_keeps_the_last_window(minilm_engine, st_minilm, sample_documents):
    words = max((d["text"] for d in sample_documents), key=len).split()
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, side=TruncationSide.START)
    (kept_end,) = minilm_engine.embed([" ".join(words)], policy=policy)
    tokens = minilm_engine.tokenizer.count_and_tokenize([" ".join(words)])[0]
    tail_text = minilm_engine.tokenizer.decode(tokens[-254:])
    reference = st_minilm.encode([tail_text])[0]
    assert float(kept_end @ reference) >= 0.999


def test_window_beyond_the_position_limit_is_refused(minilm_engine):
    with pytest.raises(ValueError, match="window_tokens=600 is outside 1..512"):
        minilm_engine.embed(["x"], policy=LongDocumentPolicy(window_tokens=600))

"""CostModel prices a document exactly as the window planner plans it: the same tokens, rows,
cuts, splits and error codes, for every mode, over short, window-sized and long documents."""
import pytest

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingRequest, PoolingTask
from poolq.engine.long_documents.document_cost import CostModel
from poolq.engine.long_documents.policy_check import resolve_window
from poolq.engine.long_documents.window_planner import WindowPlanner
from poolq.engine.request import ChunkBoundary, RequestError

POLICIES = [
    LongDocumentPolicy(mode=LongDocumentMode.ERROR),
    LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE),
    LongDocumentPolicy(mode=LongDocumentMode.CHUNKED),
    LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, max_embed_len=600),
    LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_specials=True, window_tokens=100),
    LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS),
    LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_tokens=90),
    LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_by=ChunkBoundary.SENTENCES, chunk_sentences=8,
                       window_tokens=64),
    LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_by=ChunkBoundary.SENTENCES, window_tokens=64,
                       split_long_chunks=False),
    LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, chunk_tokens=70),
    LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, chunk_by=ChunkBoundary.SENTENCES, window_tokens=128,
                       overlap_tokens=10),
]


@pytest.fixture(scope="module")
def texts(sample_documents):
    words = " ".join(document["text"] for document in sample_documents).split()
    return [" ".join(words[:count]) for count in (1, 5, 40, 180, 250, 256, 300, 700, 1500)] + ["", "\u200b"]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: f"{p.mode.value}-{p.chunk_by.value}-{p.window_tokens}")
def test_cost_equals_the_planners_plan(minilm_engine, texts, policy):
    tokenizer, spec = minilm_engine.tokenizer, minilm_engine.spec
    planner = WindowPlanner(tokenizer, spec, policy, resolve_window(spec, policy), minilm_engine.dispatcher, max_chunks=12)
    model = CostModel.of(spec, policy, tokenizer.special_token_counts, max_chunks=12)
    ids, offsets = tokenizer.tokenize_with_offsets(texts)
    for text, content, text_offsets in zip(texts, ids, offsets):
        plan = planner.plan(PoolingRequest(text[:10], text, task=PoolingTask.EMBED), content, text_offsets)
        cost = model.cost(len(content), text, text_offsets)
        if isinstance(plan, RequestError):
            assert cost.error == plan.code, (len(content), plan.message)
            continue
        if plan.truncated and policy.mode is LongDocumentMode.ERROR:  # the engine loop's refusal
            assert (cost.error, cost.truncated) == ("document_too_long", True)
            continue
        chunks = getattr(plan, "chunks", None)
        assert cost.error is None
        assert (cost.processed_tokens, cost.num_tokens, cost.truncated, cost.windows) == (
            plan.processed_tokens, plan.num_tokens, plan.truncated, len(plan.windows)), len(content)
        assert cost.rows == (len(chunks) if chunks is not None else 1)
        if policy.mode is LongDocumentMode.NAIVE_CHUNKS:
            assert cost.chunk_lengths == tuple(chunk.token_end - chunk.token_start for chunk in chunks)
            assert cost.split_chunks == sum(chunk.split for chunk in chunks)

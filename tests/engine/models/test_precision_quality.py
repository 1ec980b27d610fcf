"""Compute dtypes against float32, per vector, on real text: bfloat16 cosine >= 0.999 and int8
>= 0.99 on MiniLM (embed) and SPLADE-tiny (sparse), over mixed lengths 1-512 tokens and chunked
long documents. bfloat16 runs on any CPU (slowly without AVX-512-BF16/AMX: that is speed, not
correctness); int8 needs fbgemm, which every x86-64 torch build has."""
import numpy as np
import pytest

from poolq.engine import LongDocumentPolicy, PoolingEngine, PoolingTask
from poolq.engine.models.int8_encoder import Int8Refused
from poolq.engine.request import LongDocumentMode

pytestmark = pytest.mark.slow
GATES = {"bfloat16": 0.999, "int8": 0.99}
TRUNCATE = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
CHUNKED = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, max_embed_len=8192)


@pytest.fixture(scope="module")
def texts(long_documents):
    """32 passages of 1 to ~500 words (1 to 512 tokens, truncated at the window) from real articles."""
    words = " ".join(d["text"] for d in long_documents).split()
    rng = np.random.default_rng(7)
    lengths = [1, 2, 5, *rng.integers(3, 500, 29).tolist()]
    starts = rng.integers(0, len(words) - 600, len(lengths))
    return [" ".join(words[s:s + n]) for s, n in zip(starts, lengths)]


def long_texts(long_documents) -> list[str]:
    """Two articles of about 4,000 tokens: chunked into 256-token windows, their means compared."""
    return [d["text"][:16_000] for d in long_documents[:2]]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def minilm_float32(minilm_engine, texts, long_documents):
    return minilm_engine.embed(texts, policy=TRUNCATE), minilm_engine.embed(long_texts(long_documents),
                                                                              policy=CHUNKED)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_minilm_vectors_stay_within_the_gate(dtype, texts, long_documents, minilm_float32):
    engine = PoolingEngine.from_pretrained("all-MiniLM-L6-v2", dtype=dtype)
    mixed, chunked = minilm_float32
    assert _cosines(engine.embed(texts, policy=TRUNCATE), mixed).min() >= GATES[dtype]
    long_vectors = engine.embed(long_texts(long_documents), policy=CHUNKED)
    assert _cosines(long_vectors, chunked).min() >= GATES[dtype]
    assert np.allclose(np.linalg.norm(long_vectors, axis=1), 1, atol=1e-5)  # normalized in float32


def _dense_pair(rows_a, rows_b) -> tuple[np.ndarray, np.ndarray]:
    """Two lists of sparse rows as dense matrices over the token ids either uses."""
    vocab = 1 + max(int(row.token_ids.max(initial=0)) for row in [*rows_a, *rows_b])
    out = np.zeros((2, len(rows_a), vocab), dtype=np.float32)
    for side, rows in enumerate((rows_a, rows_b)):
        for i, row in enumerate(rows):
            out[side, i, row.token_ids] = row.weights
    return out[0], out[1]


@pytest.fixture(scope="module")
def splade_float32(texts):
    return PoolingEngine.from_pretrained("splade-tiny", dtype="float32").encode(texts, PoolingTask.SPARSE_EMBED,
                                                                                policy=TRUNCATE)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_splade_vectors_stay_within_the_gate(dtype, texts, splade_float32):
    # int8 must be served here, not refused: SPLADE-tiny is one of the two models the gate is for.
    reference = splade_float32
    engine = PoolingEngine.from_pretrained("splade-tiny", dtype=dtype)
    found, expected = _dense_pair(engine.encode(texts, PoolingTask.SPARSE_EMBED, policy=TRUNCATE), reference)
    assert _cosines(found, expected).min() >= GATES[dtype]


def test_splade_compiled_bf16_stays_within_the_gate(texts, splade_float32):
    # The compiled layer stack (the default for bf16 on CPUs with AMX, engine/models/compiled_encoder.py),
    # compiled here on any CPU: SPLADE-tiny's 2 small layers compile in seconds
    from poolq.engine import EngineConfig
    from poolq.engine.models.compiled_encoder import CompiledBertEncoder

    config = EngineConfig(dtype="bfloat16", compile_encoder=True, compile_after_tokens=0)
    engine = PoolingEngine.from_pretrained("splade-tiny", config=config)
    found, expected = _dense_pair(engine.encode(texts, PoolingTask.SPARSE_EMBED, policy=TRUNCATE), splade_float32)
    assert isinstance(engine.runner.encoder, CompiledBertEncoder) and engine.runner.encoder.failed is None
    assert _cosines(found, expected).min() >= GATES["bfloat16"]


def test_int8_is_refused_where_the_gate_fails(monkeypatch):
    from poolq.engine.models import int8_encoder

    monkeypatch.setattr(int8_encoder, "MIN_COSINE", 1.0)  # no int8 model reaches float32 exactly
    with pytest.raises(Int8Refused, match=r"cosine 0\.9\d+ of float32's \(the gate is 1.0\); use dtype float32"):
        PoolingEngine.from_pretrained("all-MiniLM-L6-v2", dtype="int8")


def test_int8_is_refused_for_a_model_without_the_packed_forward():
    from poolq.engine.loading.int8_runner import quantize_runner
    from poolq.engine.runners.runner import ModelRunner

    padded = ModelRunner.__new__(ModelRunner)  # the generic path (decoders, other architectures)
    with pytest.raises(Int8Refused, match="BERT-family encoders"):
        quantize_runner(padded, tokenizer=None, window_tokens=512)

"""The experimental fused bias + LayerNorm (EngineConfig.fuse_norms, inductor) against the eager
float32 engine, per vector, on real text of mixed lengths: MiniLM (embed) and SPLADE-tiny (sparse)
within the bf16 gate (cosine >= 0.999); in fact they match to float32 rounding."""
import numpy as np
import pytest
from test_precision_quality import TRUNCATE, _cosines, _dense_pair

from poolq.engine import EngineConfig, PoolingEngine, PoolingTask
from poolq.engine.models.fused_norm import fused_bias_norm

pytestmark = pytest.mark.slow
FUSED = EngineConfig(dtype="float32", fuse_norms=True)


@pytest.fixture(scope="module")
def mixed_texts(long_documents):
    """12 passages of 1 to ~500 words from real articles: the compiled kernel sees many token counts."""
    words = " ".join(d["text"] for d in long_documents).split()
    rng = np.random.default_rng(11)
    lengths = [1, 5, *rng.integers(3, 500, 10).tolist()]
    starts = rng.integers(0, len(words) - 600, len(lengths))
    return [" ".join(words[s:s + n]) for s, n in zip(starts, lengths)]


def test_minilm_fused_vectors_pass_the_gate(mixed_texts, minilm_engine):
    engine = PoolingEngine.from_pretrained("all-MiniLM-L6-v2", config=FUSED)
    assert all(layer.bias_norm is fused_bias_norm for layer in engine.runner.encoder.layers)
    fused, eager = engine.embed(mixed_texts, policy=TRUNCATE), minilm_engine.embed(mixed_texts, policy=TRUNCATE)
    assert _cosines(fused, eager).min() >= 0.999
    assert np.abs(fused - eager).max() < 1e-4  # the same arithmetic, one pass: float32 rounding only


def test_splade_fused_vectors_pass_the_gate(mixed_texts):
    eager = PoolingEngine.from_pretrained("splade-tiny", dtype="float32")
    engine = PoolingEngine.from_pretrained("splade-tiny", config=FUSED)
    found, expected = _dense_pair(engine.encode(mixed_texts, PoolingTask.SPARSE_EMBED, policy=TRUNCATE),
                                  eager.encode(mixed_texts, PoolingTask.SPARSE_EMBED, policy=TRUNCATE))
    assert _cosines(found, expected).min() >= 0.999


def test_the_flag_is_off_by_default():
    assert EngineConfig().fuse_norms is False

"""A model's ``truncate_dim`` (sentence-transformers' default Matryoshka size, saved in
``config_sentence_transformers.json``) is the size of its embed vectors when a request names no
``dimensions``, cut as ``encode`` cuts: after every module, its Normalize included, not normalized again.
A request's own ``dimensions`` still win (up to the full size, normalized again as always).

The model is ``tiny_st_bert`` saved by sentence-transformers itself with ``truncate_dim=12`` (of 32) and
published into a Hub cache; both libraries load its snapshot.
"""
import json

import numpy as np
import pytest
from support.hub_cache import publish
from support.hub_models import snapshot_dir
from support.matryoshka_model import matryoshka_st_bert

from poolq.engine import (
    LongDocumentMode,
    LongDocumentPolicy,
    ModelSpecError,
    PoolingEngine,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    read_model_spec,
)

REPO = "test-org/tiny-matryoshka"
TRUNCATE_DIM = 12
TEXTS = ["rivers and lakes", "how tall is the eiffel tower", "mountains", "a cat sat on the mat",
         "Why is the sky blue during the day but red at sunset?", "weather tomorrow in Lyon"]
WORDS = " ".join(["the cat sat on the mat and looked at the dog"] * 5)  # 55 words, one token each


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(sentence-transformers' model, the engine, the engine of the same weights saved without truncate_dim)."""
    from sentence_transformers import SentenceTransformer

    scratch = tmp_path_factory.mktemp("matryoshka")
    saved = matryoshka_st_bert(scratch, seed=5, truncate_dim=TRUNCATE_DIM)
    home = scratch / "hf"
    publish(home, REPO, saved)
    snapshot = snapshot_dir(home, REPO)
    return (SentenceTransformer(str(snapshot), device="cpu"), PoolingEngine.from_pretrained(snapshot, dtype="float32"),
            PoolingEngine.from_pretrained(scratch / "base", dtype="float32"))


def _centred_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a - a.mean(0), b - b.mean(0)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_the_model_saves_truncate_dim_where_poolq_reads_it(models):
    st, engine, _ = models
    saved = json.loads((engine.spec.path / "config_sentence_transformers.json").read_text())
    assert saved["truncate_dim"] == st.truncate_dim == engine.spec.truncate_dim == TRUNCATE_DIM
    assert engine.dimensions == st.get_embedding_dimension() == TRUNCATE_DIM


def test_default_vectors_equal_sentence_transformers_encode(models):
    st, engine, _ = models
    ours, reference = engine.embed(TEXTS), st.encode(TEXTS)
    assert ours.shape == reference.shape == (len(TEXTS), TRUNCATE_DIM)
    assert _centred_cosines(ours, reference).min() >= 0.9999
    # cut after Normalize, not normalized again: the norms are those of the unit vectors' first 12 components
    norms = np.linalg.norm(ours, axis=1)
    np.testing.assert_allclose(norms, np.linalg.norm(reference, axis=1), atol=1e-6)
    assert norms.max() < 0.95
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    # normalize_embeddings=True normalizes the cut vectors; so does an explicit normalize
    np.testing.assert_allclose(engine.embed(TEXTS, normalize=True), st.encode(TEXTS, normalize_embeddings=True), atol=1e-5)


def test_a_requests_dimensions_win_over_the_models(models):
    st, engine, full = models
    assert engine.embed(TEXTS).shape[1] == TRUNCATE_DIM
    # larger than truncate_dim, up to the full size: sentence-transformers' encode(truncate_dim=...) allows it too
    np.testing.assert_allclose(engine.embed(TEXTS, dimensions=32), st.encode(TEXTS, truncate_dim=32), atol=1e-5)
    np.testing.assert_allclose(engine.embed(TEXTS, dimensions=32), full.embed(TEXTS), atol=1e-6)
    # a request's dimensions are normalized again (a job's output.dimensions contract), as for any model
    eight = engine.embed(TEXTS, dimensions=8)
    np.testing.assert_allclose(eight, full.embed(TEXTS, dimensions=8), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(eight, axis=1), 1.0, atol=1e-6)
    (refused,) = engine.run([PoolingRequest(0, TEXTS[0], params=PoolingParams(dimensions=33))])
    assert (refused.code, refused.message) == ("invalid_dimensions", "dimensions=33 exceeds the model's 32")


def test_chunk_rows_and_chunked_documents_are_cut_after_everything(models):
    st, engine, full = models
    naive = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, window_tokens=64, chunk_tokens=20)
    (rows,) = engine.encode([WORDS], PoolingTask.EMBED, PoolingParams(), naive)
    words = WORDS.split()
    chunks = [" ".join(words[start:start + 20]) for start in range(0, len(words), 20)]
    np.testing.assert_allclose(rows, st.encode(chunks), atol=1e-5)  # each chunk as encode cuts it
    # chunked: the windows' mean, normalized (the model normalizes), then cut: the untruncated document's first 12
    chunked = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=24)
    (ours,), (whole,) = engine.run([PoolingRequest(0, WORDS)], chunked), full.run([PoolingRequest(0, WORDS)], chunked)
    np.testing.assert_allclose(ours.data, whole.data[:TRUNCATE_DIM], atol=1e-6)


def test_token_embeddings_keep_their_size(models):
    """sentence-transformers cuts the sentence embedding only; the request's dimensions still cut tokens."""
    _, engine, full = models
    (tokens,) = engine.encode(TEXTS[:1], PoolingTask.TOKEN_EMBED)
    (reference,) = full.encode(TEXTS[:1], PoolingTask.TOKEN_EMBED)
    np.testing.assert_allclose(tokens, reference, atol=1e-6)
    assert tokens.shape[1] == 32 and engine.dimensions == TRUNCATE_DIM


@pytest.mark.parametrize("value", [0, -1, "64", 12.5, True])
def test_a_truncate_dim_that_is_no_size_is_refused_naming_the_file(models, tmp_path, value):
    _, engine, _ = models
    config = json.loads((engine.spec.path / "config_sentence_transformers.json").read_text())
    for path in engine.spec.path.iterdir():
        if path.is_file() and path.suffix == ".json":
            (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text((engine.spec.path / "1_Pooling" / "config.json").read_text())
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps({**config, "truncate_dim": value}))
    with pytest.raises(ModelSpecError, match=r"config_sentence_transformers.json: truncate_dim is .*not a positive"):
        read_model_spec(tmp_path)
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps({**config, "truncate_dim": None}))
    assert read_model_spec(tmp_path).truncate_dim is None  # null: no cut, as sentence-transformers saves none

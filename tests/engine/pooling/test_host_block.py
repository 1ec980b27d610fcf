"""Heads copy to the host once per call (engine/pooling/host_block.py), whatever params their rows carry,
and hand out what finishing each row alone hands out (the per-row references below are the old heads)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from poolq.devtools.bench.jobpath.host_reads import HostReads
from poolq.engine.pooling.heads.activation import Softmax
from poolq.engine.pooling.heads.classifier_heads import ClassifierHead, TokenClassifierHead
from poolq.engine.pooling.heads.sparse_head import SparseHead
from poolq.engine.pooling.heads.task_heads import EmbeddingHead, TokenEmbeddingHead
from poolq.engine.pooling.host_block import parts_to_host
from poolq.engine.pooling.m3_poolers import ColbertHead, TokenWeightSparseHead
from poolq.engine.request import PoolingParams

HIDDEN = 8
MIXED = (PoolingParams(), PoolingParams(dimensions=3), PoolingParams(normalize=False), PoolingParams(dimensions=3),
         PoolingParams(dimensions=5, normalize=False), PoolingParams())  # four groups, interleaved
DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture(autouse=True)
def _inference_mode():
    with torch.inference_mode():
        yield


def _linear(n_out, dtype=torch.float32):
    torch.manual_seed(1)
    return torch.nn.Linear(HIDDEN, n_out).to(dtype).eval()


def _states(lengths, dtype, one_buffer=False):
    """``[n, HIDDEN]`` per length: separate tensors, or back-to-back slices of one buffer (AllPool's)."""
    torch.manual_seed(0)
    if not one_buffer:
        return [torch.randn(n, HIDDEN).to(dtype) for n in lengths]
    flat, ends = torch.randn(sum(lengths), HIDDEN).to(dtype), np.cumsum(lengths).tolist()
    return [flat[end - n : end] for n, end in zip(lengths, ends)]


def _calls(head, states, params):
    """(outputs, copies of floating-point values to the host) of one head call."""
    with HostReads() as reads:
        out = head.forward(states, params)
    return out, reads.device_reads()


def _finished_row(vector, p, default_normalize):  # the old heads' per-row finish, copied once per row
    vector = (vector if p.dimensions is None else vector[..., : p.dimensions]).float()
    normalize = default_normalize if p.normalize is None else p.normalize
    return (F.normalize(vector, p=2, dim=-1) if normalize else vector).cpu().numpy()


def _assert_rows_equal(out, expected, exact=True):
    assert len(out) == len(expected)
    for got, want in zip(out, expected):
        assert got.dtype == np.float32 and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("projected", [False, True])
def test_embedding_head_copies_once_and_matches_each_row_alone(dtype, projected):
    projector = _linear(6, dtype) if projected else None
    pooled = torch.randn(len(MIXED), HIDDEN).to(dtype)
    out, copies = _calls(EmbeddingHead(projector, normalize=True), pooled, MIXED)
    vectors = pooled.float() if projector is None else projector(pooled).float()
    _assert_rows_equal(out, [_finished_row(v, p, True) for v, p in zip(vectors, MIXED)])
    assert copies == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("projected", [False, True])
@pytest.mark.parametrize("one_buffer", [False, True])
def test_token_embedding_head_copies_once_for_ragged_sequences(dtype, projected, one_buffer):
    projector = _linear(6, dtype) if projected else None
    states = _states([3, 1, 0, 5, 2, 4], dtype, one_buffer)
    out, copies = _calls(TokenEmbeddingHead(projector, normalize=True), states, MIXED)
    expected = [_finished_row(s.float() if projector is None else projector(s).float(), p, True) for s, p in zip(states, MIXED)]
    # A group's tokens go through the projector as one matmul: float32 may round the last bit apart from one per sequence.
    _assert_rows_equal(out, expected, exact=not (projected and dtype == torch.float32))
    assert copies == 1


class _Cats(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += func is torch.cat
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("order, cats", [([0, 1, 2, 3], 0), ([2, 3, 0, 1], 1)])
def test_token_states_back_to_back_in_one_buffer_are_one_view_not_a_copy(order, cats):
    in_buffer = _states([3, 0, 2, 4], torch.float32, one_buffer=True)
    states = [in_buffer[i] for i in order]
    with _Cats() as made:
        out, copies = _calls(TokenEmbeddingHead(None, normalize=True), states, (PoolingParams(),) * 4)
    _assert_rows_equal(out, [_finished_row(s, PoolingParams(), True) for s in states])
    assert made.calls == cats and copies == 1  # out of order, the tokens are concatenated


def test_classifier_heads_copy_once_with_mixed_activation_and_label_columns():
    classifier = _linear(4)
    params = (PoolingParams(), PoolingParams(activation=False), PoolingParams(returned_token_ids=(2, 0)),
              PoolingParams(activation=False, returned_token_ids=(1,)))
    pooled = torch.randn(len(params), HIDDEN)
    out, copies = _calls(ClassifierHead(classifier, Softmax(), None), pooled, params)
    logits = classifier(pooled)
    _assert_rows_equal(out, [(torch.softmax(row, -1) if p.activation else row).numpy() for row, p in zip(logits, params)])
    assert copies == 1

    states = _states([2, 3, 1, 4], torch.float32)
    out, copies = _calls(TokenClassifierHead(classifier, Softmax(), None), states, params)
    expected = []
    for tokens, p in zip(states, params):
        scores = torch.softmax(classifier(tokens), -1) if p.activation else classifier(tokens)
        expected.append((scores if p.returned_token_ids is None else scores[:, list(p.returned_token_ids)]).numpy())
    _assert_rows_equal(out, expected, exact=False)
    assert copies == 1


def test_colbert_head_copies_once_and_drops_each_first_token():
    linear = _linear(5)
    states = _states([3, 1, 4], torch.float32)
    out, copies = _calls(ColbertHead(linear), states, (PoolingParams(),) * 3)
    _assert_rows_equal(out, [F.normalize(linear(s[1:]), p=2, dim=-1).numpy() for s in states], exact=False)
    assert [o.shape for o in out] == [(2, 5), (0, 5), (3, 5)]
    assert copies == 1


@pytest.mark.parametrize("head", [SparseHead(_linear(11), "max"), TokenWeightSparseHead(_linear(1), (3,))])
def test_sparse_heads_copy_ids_and_weights_once_for_all_sequences(head):
    states = _states([3, 0, 4, 2], torch.float32)
    ids = [torch.tensor([3, 5, 5, 7][: len(s)]) for s in states]
    inputs = list(zip(states, ids)) if isinstance(head, TokenWeightSparseHead) else states
    with HostReads() as reads:
        out = head.forward(inputs, (PoolingParams(),) * len(states))
    assert sum(reads.sites.values()) == 2  # the ids and the weights, not two per sequence
    for vector, one in zip(out, inputs):
        (alone,) = head.forward([one], (PoolingParams(),))  # a sequence alone is what it was
        np.testing.assert_array_equal(vector.token_ids, alone.token_ids)
        np.testing.assert_array_equal(vector.weights, alone.weights)
        assert vector.token_ids.dtype == np.int32 and vector.weights.dtype == np.float32
    assert len(out[1].token_ids) == 0


def test_parts_come_back_as_disjoint_views_of_one_copy():
    parts = [torch.arange(6.0).reshape(2, 3), torch.empty(0, 3), torch.tensor([7.0])]
    host = parts_to_host(parts)
    assert [h.shape for h in host] == [(2, 3), (0, 3), (1,)]
    host[0][1] += 100  # a caller changing its row changes nobody else's
    assert host[2].tolist() == [7.0] and host[0][0].tolist() == [0.0, 1.0, 2.0]
    assert parts_to_host([]) == []


@pytest.mark.parametrize("head, rows", [(EmbeddingHead(None, normalize=True), torch.zeros(2, HIDDEN)),
                                        (TokenEmbeddingHead(None, normalize=True), [torch.zeros(3, HIDDEN)])])
def test_a_head_refuses_params_that_do_not_match_its_sequences(head, rows):
    with pytest.raises(ValueError, match="3 requests' params for .* sequences"):
        head.forward(rows, (PoolingParams(),) * 3)

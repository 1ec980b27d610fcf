"""Stored results come back exactly: every kind of data a task's result holds."""
import numpy as np
import pytest

from poolq.engine import ChunkSpan, MultiOutput, PoolingOutput, PoolingTask, SparseVector
from poolq.jobs.reuse.result_codec import decode_result, encode_result

RNG = np.random.default_rng(3)


def _sparse(n=5):
    return SparseVector(np.sort(RNG.choice(1000, n, replace=False)).astype(np.int32), RNG.random(n, dtype=np.float32))


@pytest.mark.parametrize("data, extra", [
    (RNG.standard_normal(8).astype(np.float32), {}),
    (RNG.standard_normal((3, 8)).astype(np.float16), {"chunks": (ChunkSpan(0, 1, 5, 0, 20), ChunkSpan(1, 5, 9, 20, 41, True),
                                                                 ChunkSpan(2, 9, 10, 41, 45))}),
    (_sparse(), {}),
    ((_sparse(), _sparse(3)), {"chunks": (ChunkSpan(0, 0, 4, 0, 10), ChunkSpan(1, 4, 8, 10, 30))}),
    (MultiOutput({PoolingTask.EMBED: RNG.standard_normal(8).astype(np.float32), PoolingTask.SPARSE_EMBED: _sparse()}), {}),
    (RNG.standard_normal((6, 4)).astype(np.float32), {"token_ids": np.arange(6, dtype=np.int32),
                                                      "char_offsets": np.zeros((6, 2), dtype=np.int32)}),
])
def test_a_result_round_trips_exactly(data, extra):
    result = PoolingOutput("first", data, num_tokens=10, truncated=True, processed_tokens=7, **extra)
    back = decode_result(encode_result(result), key="second")
    assert back.key == "second"
    assert (back.num_tokens, back.truncated, back.processed_tokens, back.chunks) == (10, True, 7, result.chunks)
    _assert_same(back.data, data)
    for name in ("token_ids", "char_offsets"):
        _assert_same(getattr(back, name), getattr(result, name))


def _assert_same(got, expected):
    if expected is None:
        assert got is None
    elif isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes() and got.shape == expected.shape
    elif isinstance(expected, SparseVector):
        _assert_same(got.token_ids, expected.token_ids)
        _assert_same(got.weights, expected.weights)
    elif isinstance(expected, MultiOutput):
        assert got.outputs.keys() == expected.outputs.keys()
        for task in expected.outputs:
            _assert_same(got.outputs[task], expected.outputs[task])
    else:
        assert type(got) is tuple and len(got) == len(expected)
        for one, other in zip(got, expected):
            _assert_same(one, other)


def test_stored_bytes_never_unpickle():
    with pytest.raises(TypeError):
        encode_result(PoolingOutput("k", {"a": object()}, num_tokens=1, truncated=False, processed_tokens=1))

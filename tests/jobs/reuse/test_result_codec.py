"""Stored results come back exactly: every kind of data a task's result holds."""
import io
import json

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


def test_a_result_an_earlier_version_stored_as_npz_still_decodes():
    # What encode_result wrote before PQR1: the arrays and a JSON header array in one .npz
    data = RNG.standard_normal((2, 4)).astype(np.float32)
    header = {"num_tokens": 9, "truncated": False, "processed_tokens": 9, "chunks": [[0, 0, 5, 0, 12, False],
                                                                                     [1, 5, 9, 12, 30, False]],
              "data": {"kind": "array"}}
    buffer = io.BytesIO()
    np.savez(buffer, data=data, token_ids=np.arange(9, dtype=np.int32),
             header=np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8))
    back = decode_result(buffer.getvalue(), key="old")
    _assert_same(back.data, data)
    _assert_same(back.token_ids, np.arange(9, dtype=np.int32))
    assert back.chunks == (ChunkSpan(0, 0, 5, 0, 12), ChunkSpan(1, 5, 9, 12, 30)) and back.num_tokens == 9


def test_decoded_arrays_are_writable_and_bytes_that_are_no_result_are_refused():
    back = decode_result(encode_result(PoolingOutput("k", np.ones(4, np.float32), 4, False, 4)), key="k")
    back.data[0] = 2.0  # as np.load gave: a copy of its own, not a view of the stored bytes
    with pytest.raises(ValueError, match="not a stored result"):
        decode_result(b"garbage bytes", key="k")

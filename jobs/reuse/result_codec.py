"""An engine result as bytes and back, exactly: what the reuse store keeps for one document.

A document's whole result is kept (every chunk row of a chunk mode with it), so a copy feeds a
task's ``append`` the very arrays a fresh run would, and its rows come out bit-identical. Nothing
is pickled. The bytes are ``PQR1``, a JSON header's length, the header (the result's fields and,
for each array, its dtype, shape and place) and the arrays' raw bytes one after another: a shard
encodes every document it embeds, and an ``.npz`` (a zip archive per document) cost several times
as much. Results stored as ``.npz`` by earlier versions still decode (read with
``allow_pickle=False``).
"""
from __future__ import annotations

import io
import json
import struct

import numpy as np

from poolq.engine import ChunkSpan, MultiOutput, PoolingOutput, PoolingTask, SparseVector

_MAGIC = b"PQR1"
_LENGTH = struct.Struct("<I")  # the header's length in bytes
_HEADER = "header"  # the JSON header's name inside an earlier version's .npz
_ZIP_MAGIC = b"PK\x03\x04"


def encode_result(result: PoolingOutput) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    header = {
        "num_tokens": result.num_tokens, "truncated": result.truncated, "processed_tokens": result.processed_tokens,
        "chunks": None if result.chunks is None else [_span_fields(span) for span in result.chunks],
        "data": _put(arrays, "data", result.data),
    }
    for name in ("token_ids", "char_offsets"):
        value = getattr(result, name)
        if value is not None:
            arrays[name] = value
    return _pack(header, arrays)


def _pack(header: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """``PQR1``, the header's length, the header, then each array's bytes in C order."""
    places, chunks, offset = {}, [], 0
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError(f"a result's array {name!r} holds Python objects, which are never stored for reuse")
        raw = array.tobytes()
        places[name] = [array.dtype.str, list(array.shape), offset, len(raw)]
        chunks.append(raw)
        offset += len(raw)
    encoded = json.dumps({**header, "arrays": places}).encode("utf-8")
    return b"".join([_MAGIC, _LENGTH.pack(len(encoded)), encoded, *chunks])


def decode_result(raw: bytes, key: object) -> PoolingOutput:
    """The result ``raw`` holds, answering the request keyed ``key``."""
    header, arrays = _unpack_npz(raw) if raw.startswith(_ZIP_MAGIC) else _unpack(raw)
    chunks = header["chunks"]
    return PoolingOutput(
        key=key, data=_take(arrays, header["data"]), num_tokens=header["num_tokens"], truncated=header["truncated"],
        processed_tokens=header["processed_tokens"],
        chunks=None if chunks is None else tuple(ChunkSpan(*span) for span in chunks),
        token_ids=arrays.get("token_ids"), char_offsets=arrays.get("char_offsets"),
    )


def _unpack(raw: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    if not raw.startswith(_MAGIC):
        raise ValueError(f"not a stored result: starts {raw[:4]!r}, expected {_MAGIC!r} (or an earlier .npz)")
    start = len(_MAGIC) + _LENGTH.size
    (length,) = _LENGTH.unpack_from(raw, len(_MAGIC))
    header = json.loads(raw[start:start + length].decode("utf-8"))
    body = start + length
    arrays = {}
    for name, (dtype, shape, offset, size) in header.pop("arrays").items():
        # copied out of ``raw``: writable arrays, as np.load gave, that do not pin the whole object
        array = np.frombuffer(raw, dtype=np.dtype(dtype), count=size // np.dtype(dtype).itemsize, offset=body + offset)
        arrays[name] = array.reshape(shape).copy()
    return header, arrays


def _unpack_npz(raw: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """A result an earlier version stored as an ``.npz`` (its JSON header an array named ``header``)."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    return json.loads(arrays.pop(_HEADER).tobytes().decode("utf-8")), arrays


def _span_fields(span: ChunkSpan) -> list:
    return [span.chunk_index, span.token_start, span.token_end, span.char_start, span.char_end, span.split]


def _put(arrays: dict[str, np.ndarray], name: str, value: object) -> dict:
    """Store ``value`` under names starting with ``name``; returns how to read it back."""
    if isinstance(value, np.ndarray):
        arrays[name] = value
        return {"kind": "array"}
    if isinstance(value, SparseVector):
        arrays[f"{name}.ids"], arrays[f"{name}.weights"] = value.token_ids, value.weights
        return {"kind": "sparse"}
    if isinstance(value, MultiOutput):
        return {"kind": "multi", "tasks": {task.value: _put(arrays, f"{name}.{task.value}", output)
                                           for task, output in value.outputs.items()}}
    if isinstance(value, tuple):
        return {"kind": "tuple", "items": [_put(arrays, f"{name}.{index}", item) for index, item in enumerate(value)]}
    raise TypeError(f"a result's data of type {type(value).__name__} cannot be stored for reuse")


def _take(arrays: dict[str, np.ndarray], shape: dict, name: str = "data"):
    kind = shape["kind"]
    if kind == "array":
        return arrays[name]
    if kind == "sparse":
        return SparseVector(arrays[f"{name}.ids"], arrays[f"{name}.weights"])
    if kind == "multi":
        return MultiOutput({PoolingTask(task): _take(arrays, inner, f"{name}.{task}") for task, inner in shape["tasks"].items()})
    return tuple(_take(arrays, inner, f"{name}.{index}") for index, inner in enumerate(shape["items"]))

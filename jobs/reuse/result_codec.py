"""An engine result as bytes and back, exactly: what the reuse store keeps for one document.

A document's whole result is kept (every chunk row of a chunk mode with it), so a copy feeds a
task's ``append`` the very arrays a fresh run would, and its rows come out bit-identical. The bytes
are an ``.npz`` of plain arrays plus a JSON header; nothing is pickled (a bucket object is read
back with ``allow_pickle=False``).
"""
from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from poolq.engine import ChunkSpan, MultiOutput, PoolingOutput, PoolingTask, SparseVector

_HEADER = "header"


def encode_result(result: PoolingOutput) -> bytes:
    arrays: dict[str, Any] = {}  # Any: numpy's stubs read ``**arrays`` as its allow_pickle flag
    header = {
        "num_tokens": result.num_tokens, "truncated": result.truncated, "processed_tokens": result.processed_tokens,
        "chunks": None if result.chunks is None else [_span_fields(span) for span in result.chunks],
        "data": _put(arrays, "data", result.data),
    }
    for name in ("token_ids", "char_offsets"):
        value = getattr(result, name)
        if value is not None:
            arrays[name] = value
    arrays[_HEADER] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode_result(raw: bytes, key: object) -> PoolingOutput:
    """The result ``raw`` holds, answering the request keyed ``key``."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    header = json.loads(arrays.pop(_HEADER).tobytes().decode("utf-8"))
    chunks = header["chunks"]
    return PoolingOutput(
        key=key, data=_take(arrays, header["data"]), num_tokens=header["num_tokens"], truncated=header["truncated"],
        processed_tokens=header["processed_tokens"],
        chunks=None if chunks is None else tuple(ChunkSpan(*span) for span in chunks),
        token_ids=arrays.get("token_ids"), char_offsets=arrays.get("char_offsets"),
    )


def _span_fields(span: ChunkSpan) -> list:
    return [span.chunk_index, span.token_start, span.token_end, span.char_start, span.char_end, span.split]


def _put(arrays: dict[str, Any], name: str, value: object) -> dict:
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

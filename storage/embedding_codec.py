"""How the ``embedding`` column stores vectors: one small codec per output dtype.

Every codec turns float32 vectors ``[n, d]`` into an Arrow array of :meth:`arrow_type` and back
(as closely as its encoding allows), and says in :meth:`manifest_info` what a reader needs to
decode it. ``codec_for`` picks one by the job's ``output.dtype``.

- ``float32``: ``fixed_size_list<float>[d]``, exact.
- ``float16``: ``fixed_size_list<halffloat>[d]``, rounded to nearest half.
- ``int8``: ``fixed_size_list<int8>[d]``, an affine code over a range ``[min, max]`` fixed for
  the whole job: ``q = clip(round((x - min) / (max - min) * 255 - 128), -128, 127)`` and back
  ``x ≈ (q - zero_point) * scale`` with ``scale = (max - min) / 255`` and
  ``zero_point = -128 - min / scale`` (the same as ``min + (q + 128) * scale``).
- ``binary``: ``fixed_size_binary[ceil(d / 8)]``, one bit per dimension (``x > 0``), packed by
  ``numpy.packbits``: dimension ``i`` is bit ``7 - i % 8`` (most significant first) of byte ``i // 8``.
"""
from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pyarrow as pa

ValueRange = tuple[float, float]


class EmbeddingCodec:
    """The interface: Arrow type for ``d`` dimensions, encode, decode, what the manifest records."""

    dtype: ClassVar[str]

    @classmethod
    def from_options(cls, value_range: ValueRange | None) -> "EmbeddingCodec":
        """The codec for a job's options; only ``int8`` uses ``value_range``."""
        return cls()

    def arrow_type(self, dimensions: int) -> pa.DataType:
        raise NotImplementedError

    def encode(self, vectors: np.ndarray) -> pa.Array:
        """float32 ``[n, d]`` -> an Arrow array of ``arrow_type(d)`` with ``n`` entries."""
        raise NotImplementedError

    def decode(self, column: pa.Array | pa.ChunkedArray, dimensions: int) -> np.ndarray:
        """An ``embedding`` column -> float32 ``[n, d]``: the vectors, as closely as the code allows."""
        raise NotImplementedError

    def manifest_info(self) -> dict:
        """What the manifest's ``output`` block says about the encoding."""
        return {"dtype": self.dtype}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.manifest_info() == self.manifest_info()

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.manifest_info()})"


class _ListCodec(EmbeddingCodec):
    """Vectors as ``fixed_size_list<element>[d]``; subclasses set the element type."""

    element: ClassVar[pa.DataType]
    numpy_dtype: ClassVar[type]

    def arrow_type(self, dimensions: int) -> pa.DataType:
        return pa.list_(self.element, dimensions)

    def encode(self, vectors: np.ndarray) -> pa.Array:
        flat = np.ascontiguousarray(self._to_elements(vectors)).reshape(-1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat, self.element), _width(vectors))

    def decode(self, column: pa.Array | pa.ChunkedArray, dimensions: int) -> np.ndarray:
        flat = _combined(column).flatten().to_numpy(zero_copy_only=False)
        return self._from_elements(flat.reshape(-1, dimensions))

    def _to_elements(self, vectors: np.ndarray) -> np.ndarray:
        return vectors.astype(self.numpy_dtype, copy=False)

    def _from_elements(self, values: np.ndarray) -> np.ndarray:
        return values.astype(np.float32)


class Float32Codec(_ListCodec):
    """Exact float32 (the default, the format of every part written before dtypes existed)."""

    dtype = "float32"
    element = pa.float32()
    numpy_dtype = np.float32


class Float16Codec(_ListCodec):
    """IEEE half precision: about 3 significant digits, half the bytes."""

    dtype = "float16"
    element = pa.float16()
    numpy_dtype = np.float16


class Int8Codec(_ListCodec):
    """Affine int8 over a range fixed for the whole job (never per batch); see the module docstring."""

    dtype = "int8"
    element = pa.int8()
    numpy_dtype = np.int8

    def __init__(self, low: float, high: float) -> None:
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise ValueError(f"int8 range must be two finite numbers with min < max, got [{low}, {high}]")
        self.low = float(low)
        self.high = float(high)
        # Both go into the manifest, which is JSON: no infinity, no division by a vanishing scale.
        if not (math.isfinite(self.scale) and self.scale > 0 and math.isfinite(self.zero_point)):
            raise ValueError(f"int8 range [{low}, {high}] is too wide or too narrow to quantize: "
                             f"its step (max - min) / 255 must be a finite number above zero")

    @classmethod
    def from_options(cls, value_range: ValueRange | None) -> "Int8Codec":
        if value_range is None:
            raise ValueError("int8 output needs a calibration range [min, max]")
        return cls(*value_range)

    @property
    def scale(self) -> float:
        return (self.high - self.low) / 255.0

    @property
    def zero_point(self) -> float:
        """The (fractional) code of 0.0: ``x = (q - zero_point) * scale``."""
        return -128.0 - self.low / self.scale

    def _to_elements(self, vectors: np.ndarray) -> np.ndarray:
        codes = np.rint((vectors.astype(np.float64) - self.low) / (self.high - self.low) * 255.0 - 128.0)
        return np.clip(codes, -128, 127).astype(np.int8)

    def _from_elements(self, values: np.ndarray) -> np.ndarray:
        return (self.low + (values.astype(np.float64) + 128.0) * self.scale).astype(np.float32)

    def manifest_info(self) -> dict:
        return {"dtype": self.dtype, "min": self.low, "max": self.high, "scale": self.scale, "zero_point": self.zero_point}


class BinaryCodec(EmbeddingCodec):
    """One bit per dimension, ``x > 0``, packed most significant bit first (``numpy.packbits``)."""

    dtype = "binary"

    def arrow_type(self, dimensions: int) -> pa.DataType:
        return pa.binary(math.ceil(dimensions / 8))

    def encode(self, vectors: np.ndarray) -> pa.Array:
        packed = np.packbits(vectors > 0, axis=1, bitorder="big")
        width = math.ceil(_width(vectors) / 8)
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(packed), [None, pa.py_buffer(packed.tobytes())])

    def unpack(self, column: pa.Array | pa.ChunkedArray, dimensions: int) -> np.ndarray:
        """The bits, ``[n, d]`` uint8 0/1 (1 where the float vector was > 0)."""
        array = _combined(column)
        width = math.ceil(dimensions / 8)
        data = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        packed = data[array.offset * width:(array.offset + len(array)) * width].reshape(-1, width)
        return np.unpackbits(packed, axis=1, count=dimensions, bitorder="big")

    def decode(self, column: pa.Array | pa.ChunkedArray, dimensions: int) -> np.ndarray:
        """The sign vectors: +1.0 where the bit is set, -1.0 where not (the magnitudes are gone)."""
        return np.where(self.unpack(column, dimensions) == 1, 1.0, -1.0).astype(np.float32)

    def manifest_info(self) -> dict:
        return {"dtype": self.dtype, "threshold": "x > 0", "bit_order": "big"}


CODECS: dict[str, type[EmbeddingCodec]] = {
    codec.dtype: codec for codec in (Float32Codec, Float16Codec, Int8Codec, BinaryCodec)
}


def codec_for(dtype: str, value_range: ValueRange | None = None) -> EmbeddingCodec:
    """The codec for ``dtype`` (a key of :data:`CODECS`); ``int8`` needs ``value_range``."""
    if dtype not in CODECS:
        raise ValueError(f"unknown embedding dtype {dtype!r}; known: {', '.join(CODECS)}")
    return CODECS[dtype].from_options(value_range)


def _width(vectors: np.ndarray) -> int:
    if vectors.ndim != 2:
        raise ValueError(f"expected vectors [n, d], got shape {vectors.shape}")
    return vectors.shape[1]


def _combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

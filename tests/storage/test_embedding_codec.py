"""The embedding column's encodings: types, round trips, what the manifest records."""
import numpy as np
import pyarrow as pa
import pytest

from poolq.jobs.tasks.rows import EmbeddingRows
from poolq.storage import CODECS, codec_for, read_embeddings
from poolq.storage.embedding_codec import BinaryCodec, Float16Codec, Float32Codec, Int8Codec


def _unit_vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _round_trip(codec, vectors: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Write through a real Parquet part and decode the column read back."""
    rows = EmbeddingRows(dimensions=vectors.shape[1], codec=codec)
    for i, vector in enumerate(vectors):
        rows.append(f"doc-{i}", vector, 10, False, content_hash="h")
    table = read_embeddings(rows.to_parquet_bytes())
    return table, codec.decode(table.column("embedding"), vectors.shape[1])


@pytest.mark.parametrize("dtype, arrow_type", [
    ("float32", pa.list_(pa.float32(), 384)),
    ("float16", pa.list_(pa.float16(), 384)),
    ("int8", pa.list_(pa.int8(), 384)),
    ("binary", pa.binary(48)),
])
def test_each_dtype_has_its_arrow_type(dtype, arrow_type):
    codec = codec_for(dtype, (-1.0, 1.0))
    table, _ = _round_trip(codec, _unit_vectors(3, 384))
    assert codec.arrow_type(384) == arrow_type == table.schema.field("embedding").type
    assert codec.manifest_info()["dtype"] == dtype


def test_float32_is_exact_and_the_default():
    vectors = _unit_vectors(5, 16)
    table, decoded = _round_trip(Float32Codec(), vectors)
    np.testing.assert_array_equal(decoded, vectors)
    assert EmbeddingRows(dimensions=16).codec == Float32Codec() and decoded.dtype == np.float32


def test_float16_is_within_half_precision():
    vectors = _unit_vectors(20, 64) * 3
    _, decoded = _round_trip(Float16Codec(), vectors)
    np.testing.assert_allclose(decoded, vectors, rtol=2**-11, atol=2**-24)
    np.testing.assert_array_equal(decoded, vectors.astype(np.float16).astype(np.float32))


def test_int8_dequantizes_within_half_a_step_and_records_its_range():
    codec = Int8Codec(-0.5, 0.25)
    vectors = np.random.default_rng(1).uniform(-0.5, 0.25, (50, 32)).astype(np.float32)
    vectors[0, :2] = [-0.5, 0.25]  # the ends map to -128 and 127
    table, decoded = _round_trip(codec, vectors)
    assert np.abs(decoded - vectors).max() <= codec.scale / 2 + 1e-7
    codes = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    assert codes[0, :2].tolist() == [-128, 127]
    info = codec.manifest_info()
    assert info == {"dtype": "int8", "min": -0.5, "max": 0.25, "scale": 0.75 / 255, "zero_point": -128 + 0.5 / (0.75 / 255)}
    # The documented formula, from the manifest alone
    np.testing.assert_allclose((codes - info["zero_point"]) * info["scale"], decoded, atol=1e-6)


def test_int8_clips_values_outside_its_range():
    codec = Int8Codec(-1.0, 1.0)
    codes = codec.encode(np.array([[-3.0, 0.0, 3.0]], dtype=np.float32)).flatten().to_pylist()
    assert codes == [-128, 0, 127]  # 0.0 sits half way: round(127.5 - 128) = round(-0.5) = 0


@pytest.mark.parametrize("value_range", [(1.0, 1.0), (2.0, -2.0), (0.0, float("inf")), (float("nan"), 1.0)])
def test_int8_refuses_a_bad_range(value_range):
    with pytest.raises(ValueError, match="min < max"):
        Int8Codec(*value_range)


def test_int8_needs_a_range_and_unknown_dtypes_are_refused():
    with pytest.raises(ValueError, match="calibration range"):
        codec_for("int8")
    with pytest.raises(ValueError, match="unknown embedding dtype 'int4'"):
        codec_for("int4")
    assert set(CODECS) == {"float32", "float16", "int8", "binary"}


def test_binary_bits_are_the_signs_packed_most_significant_first():
    vectors = _unit_vectors(7, 384)
    vectors[0, :8] = [1, -1, 0, 2, -3, 0.5, -0.5, 1]  # bits 1 0 0 1 0 1 0 1 -> 0b10010101
    codec = BinaryCodec()
    table, decoded = _round_trip(codec, vectors)
    packed = table.column("embedding").to_pylist()
    assert all(len(value) == 48 for value in packed) and packed[0][0] == 0b10010101
    bits = codec.unpack(table.column("embedding"), 384)
    np.testing.assert_array_equal(bits, (vectors > 0).astype(np.uint8))
    np.testing.assert_array_equal(bits, np.unpackbits(np.frombuffer(b"".join(packed), np.uint8).reshape(7, 48), axis=1))
    np.testing.assert_array_equal(decoded, np.where(vectors > 0, 1.0, -1.0))


def test_binary_pads_the_last_byte_and_decodes_sliced_columns():
    vectors = _unit_vectors(6, 10)
    codec = BinaryCodec()
    array = codec.encode(vectors)
    assert array.type == pa.binary(2)
    assert all(value[1] & 0b00111111 == 0 for value in array.to_pylist())  # 10 bits: the last 6 are zero
    column = pa.chunked_array([array.slice(0, 2), array.slice(2)])
    np.testing.assert_array_equal(codec.unpack(column, 10), (vectors > 0).astype(np.uint8))
    np.testing.assert_array_equal(codec.unpack(array.slice(3, 2), 10), (vectors[3:5] > 0).astype(np.uint8))


def test_an_empty_part_has_the_codecs_type():
    for dtype in CODECS:
        codec = codec_for(dtype, (-1.0, 1.0))
        table = read_embeddings(EmbeddingRows(dimensions=12, codec=codec).to_parquet_bytes())
        assert table.num_rows == 0 and table.schema.field("embedding").type == codec.arrow_type(12)


@pytest.mark.parametrize("value_range", [(-1e308, 1e308), (-1.7e308, 1.7e308)])
def test_an_int8_range_whose_step_overflows_is_refused(value_range):
    # Its scale would be infinite: every value -128 and "scale": Infinity in the manifest
    with pytest.raises(ValueError, match="too wide or too narrow"):
        codec_for("int8", value_range)

"""Output options on real MiniLM jobs: dtype (float32/float16/int8/binary) and Matryoshka
dimensions, what the manifest records, incremental carrying, and the 422s at submit."""
import json
import re

import numpy as np
import pyarrow as pa
import pytest
from support.api_client import authed_client

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import JobRejected, validate_spec
from poolq.storage import codec_for, read_embeddings, type_name
from poolq.worker.local_runner import local_context, run_job_locally

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def documents(sample_documents):
    """Nine short real texts: sentences of the sample corpus (three shards of at most four)."""
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [{"id": f"doc-{i}", "text": text} for i, text in enumerate(s for s in found if 40 <= len(s) <= 300)][:9]


def _run(ctx, documents, incremental_from=None, **output):
    spec = JobSpec.model_validate({"input": {"documents": documents}, "output": output, "incremental_from": incremental_from})
    status = run_job_locally(ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, status.id).layout.manifest))
    table = pa.concat_tables([read_embeddings(ctx.store.get(part["key"])) for part in manifest["parts"]])
    return manifest, table.sort_by("id")


def _decode(manifest: dict, table: pa.Table) -> np.ndarray:
    """The vectors, decoded with nothing but what the manifest's ``output`` block says."""
    output = manifest["output"]
    value_range = (output["min"], output["max"]) if "min" in output else None
    return codec_for(output["dtype"], value_range).decode(table.column("embedding"), output["dimensions"])


def _encoding(manifest: dict, table: pa.Table) -> dict:
    """The manifest's output block without its schema, once the schema is checked against the part's."""
    output = dict(manifest["output"])
    schema = output.pop("schema")
    assert [(column["name"], column["type"], column["nullable"]) for column in schema] == [
        (field.name, type_name(field.type), field.nullable) for field in table.schema
    ]
    return output


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture
def reference(local_ctx, documents):
    """The float32 job of the same documents: manifest, table, vectors."""
    manifest, table = _run(local_ctx, documents)
    return manifest, table, _decode(manifest, table)


def test_float32_is_unchanged(reference, minilm_engine, documents):
    manifest, table, vectors = reference
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    np.testing.assert_allclose(vectors, minilm_engine.embed([d["text"] for d in documents]), atol=1e-6)
    assert manifest["dimensions"] == 384
    assert _encoding(manifest, table) == {"format": "parquet", "dtype": "float32", "dimensions": 384}


def test_float16_is_close_to_float32(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dtype="float16")
    assert table.schema.field("embedding").type == pa.list_(pa.float16(), 384)
    assert _cosines(_decode(manifest, table), reference[2]).min() >= 0.999
    assert _encoding(manifest, table) == {"format": "parquet", "dtype": "float16", "dimensions": 384}


def test_int8_uses_the_unit_range_of_a_normalized_model(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dtype="int8")
    assert table.schema.field("embedding").type == pa.list_(pa.int8(), 384)
    decoded = _decode(manifest, table)
    assert _cosines(decoded, reference[2]).min() >= 0.99
    scale = 2 / 255
    assert np.abs(decoded - reference[2]).max() <= scale / 2 + 1e-6
    assert _encoding(manifest, table) == {"format": "parquet", "dtype": "int8", "dimensions": 384,
                                  "min": -1.0, "max": 1.0, "scale": scale, "zero_point": -0.5}
    # The README's formula on the raw codes gives the same vectors
    codes = np.stack(table.column("embedding").to_numpy(zero_copy_only=False)).astype(np.float64)
    np.testing.assert_allclose((codes - manifest["output"]["zero_point"]) * manifest["output"]["scale"], decoded, atol=1e-6)


def test_int8_with_an_explicit_range_is_the_same_in_every_shard(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dtype="int8", int8_range=[-0.25, 0.25])
    assert len(manifest["parts"]) == 3  # three shards, one calibration
    assert (manifest["output"]["min"], manifest["output"]["max"]) == (-0.25, 0.25)
    clipped = np.clip(reference[2], -0.25, 0.25)
    assert np.abs(_decode(manifest, table) - clipped).max() <= 0.5 / 255 / 2 + 1e-6


def test_binary_bits_are_the_signs_of_the_float32_vectors(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dtype="binary")
    assert table.schema.field("embedding").type == pa.binary(48)
    bits = codec_for("binary").unpack(table.column("embedding"), 384)
    np.testing.assert_array_equal(bits, (reference[2] > 0).astype(np.uint8))
    assert _encoding(manifest, table) == {"format": "parquet", "dtype": "binary", "dimensions": 384,
                                  "threshold": "x > 0", "bit_order": "big"}


def test_dimensions_truncate_then_renormalize(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dimensions=64)
    vectors = _decode(manifest, table)
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = reference[2][:, :64] / np.linalg.norm(reference[2][:, :64], axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    assert manifest["dimensions"] == manifest["output"]["dimensions"] == 64
    assert manifest["options"]["output"]["dimensions"] == 64


def test_dimensions_and_binary_together(local_ctx, documents, reference):
    manifest, table = _run(local_ctx, documents, dtype="binary", dimensions=60)
    assert table.schema.field("embedding").type == pa.binary(8)  # ceil(60 / 8)
    bits = codec_for("binary").unpack(table.column("embedding"), manifest["output"]["dimensions"])
    np.testing.assert_array_equal(bits, (reference[2][:, :60] > 0).astype(np.uint8))


def test_chunk_rows_use_the_jobs_encoding(local_ctx, sample_documents):
    spec = JobSpec.model_validate({
        "input": {"documents": [{"id": "long", "text": sample_documents[0]["text"]}]},
        "long_documents": {"mode": "late_chunks", "chunk_tokens": 64}, "output": {"dtype": "int8", "dimensions": 32},
    })
    status = run_job_locally(local_ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    manifest = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    table = read_embeddings(local_ctx.store.get(manifest["parts"][0]["key"]))
    assert table.num_rows > 1 and table.schema.field("embedding").type == pa.list_(pa.int8(), 32)
    np.testing.assert_allclose(np.linalg.norm(_decode(manifest, table), axis=1), 1.0, atol=0.05)


def test_the_manifest_records_model_options_counts_tokens_and_timings(reference):
    manifest = reference[0]
    assert manifest["model"] == MODEL and manifest["options"]["output"]["dtype"] == "float32"
    assert manifest["counts"]["completed"] == 9 and manifest["usage"]["tokens"] > 0
    timings = manifest["timings"]
    assert set(timings) == {"queued_s", "running_s"} and timings["queued_s"] >= 0 and timings["running_s"] >= 0


def test_incremental_carries_only_into_the_same_encoding(local_ctx, documents):
    first, first_table = _run(local_ctx, documents, dtype="int8")
    again, again_table = _run(local_ctx, documents, incremental_from=first["job_id"], dtype="int8")
    assert again["counts"]["carried"] == 9 and again["usage"]["tokens"] == 0
    assert again_table.schema == first_table.schema and again_table.column("embedding").equals(first_table.column("embedding"))
    assert again["output"] == first["output"]
    # Another dtype is another encoding: nothing is carried, everything is embedded again
    other, other_table = _run(local_ctx, documents, incremental_from=first["job_id"], dtype="float16")
    assert other["counts"]["carried"] == 0 and other["usage"]["tokens"] > 0
    assert other_table.schema.field("embedding").type == pa.list_(pa.float16(), 384)


# -- submit-time validation ------------------------------------------------------------------

def _raw_model_dir(path):
    """A model without a Normalize module whose Dense projects 32 -> 16: config files only (no
    weights are needed to validate a job). The packaged un-normalized model, SmolLM2, is a GGUF
    that takes ~40 s to convert just to read its config."""
    files = {
        "config.json": {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32, "max_position_embeddings": 512},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        ],
        "1_Pooling/config.json": {"pooling_mode_mean_tokens": True},
        "2_Dense/config.json": {"in_features": 32, "out_features": 16},
    }
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(json.dumps(content))
    return path


@pytest.fixture
def raw_ctx(tmp_path, minilm_engine):
    ctx = local_context(tmp_path / "store", Settings(models={"raw-dense": str(_raw_model_dir(tmp_path / "raw"))}))
    ctx.engines.use(MODEL, minilm_engine)
    return ctx


@pytest.mark.parametrize("body, loc, message", [
    ({"output": {"dimensions": 385}}, ["body", "output", "dimensions"], "exceeds the 384 dimensions"),
    ({"model": "raw-dense", "output": {"dimensions": 17}}, ["body", "output", "dimensions"], "exceeds the 16 dimensions"),
    ({"model": "raw-dense", "output": {"dtype": "int8"}}, ["body", "output", "int8_range"], "does not L2-normalize"),
    ({"output": {"dtype": "int8", "int8_range": [1, -1]}}, ["body", "output", "int8_range"], "min < max"),
    ({"output": {"int8_range": [-1, 1]}}, ["body", "output", "int8_range"], "dtype 'int8' only"),
    ({"output": {"dtype": "int4"}}, ["body", "output", "dtype"], "float32"),
    ({"output": {"dimensions": 0}}, ["body", "output", "dimensions"], "greater than or equal to 1"),
])
def test_bad_output_options_are_422_naming_the_field(raw_ctx, body, loc, message):
    client = authed_client(raw_ctx)
    response = client.post("/v1/jobs", json={"input": {"documents": [{"id": "a", "text": "x"}]}, **body})
    assert response.status_code == 422
    errors = {tuple(error["loc"]): error["msg"] for error in response.json()["detail"]}
    assert message in errors[tuple(loc)]


def test_accepted_output_options(raw_ctx):
    client = authed_client(raw_ctx)
    body = {"input": {"documents": [{"id": "a", "text": "first document"}]}, "output": {"dtype": "int8", "dimensions": 384}}
    assert client.post("/v1/jobs", json=body).status_code == 202
    for output in ({"dtype": "int8", "int8_range": [-3, 3]}, {"dimensions": 16}, {"dtype": "binary"}):
        validate_spec(raw_ctx, JobSpec.model_validate({"model": "raw-dense", "input": {"documents": [{"id": "a", "text": "x"}]},
                                                       "output": output}))
    with pytest.raises(JobRejected) as rejected:
        validate_spec(raw_ctx, JobSpec.model_validate({"model": "raw-dense", "input": {"documents": [{"id": "a", "text": "x"}]},
                                                       "output": {"dtype": "int8"}}))
    assert rejected.value.field == "output.int8_range"

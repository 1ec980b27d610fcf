"""The vector type follows the job: pgvector's halfvec for float16, bit for binary, sparsevec for
sparse_embed (values equal to the parts'); Qdrant takes sparse and multi-vector (token_embed)
points, LanceDB token vectors as lists. Real stores: PostgreSQL started here, Qdrant local mode."""
import json

import lancedb
import numpy as np
import psycopg
import pytest
from qdrant_client import QdrantClient

from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.products.sinks.stores.qdrant_sink import point_id
from poolq.storage import codec_for, read_embeddings
from poolq.worker.local_runner import local_context, run_job_locally

pytestmark = pytest.mark.integration
DOCUMENTS = [{"id": f"d{i}", "text": f"sentence {i}: vectors land in the store they are searched from"} for i in range(8)]


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


@pytest.fixture
def fresh(postgres):
    """Each test creates its table: one of another shape would be refused (as a user's would)."""
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS vectors")
    return postgres


def _job(tmp_path, minilm_engine, url, documents=DOCUMENTS, **options):
    settings = Settings(sinks={"store": {"url": url, "table": "vectors"}}, sink_grants={"local": ["store"]})
    ctx = local_context(tmp_path / "out", settings)
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    status = run_job_locally(ctx, JobSpec.model_validate({"input": {"documents": documents}, "sink": "store", **options}))
    assert status.status is JobState.SUCCEEDED, status.error
    job = JobHandle.bind(ctx, status.id)
    [loaded] = job.ledger.manifest().sinks
    assert (loaded.state, loaded.upserted) == ("succeeded", len(documents)), loaded
    return job, read_embeddings(ctx.store.get(job.ledger.manifest().parts[0].key)).sort_by("id")


def _pg(postgres, query):
    with psycopg.connect(postgres.url) as conn:
        return conn.execute(query).fetchall()


@pytest.mark.parametrize("dtype, column_type", [("float16", "halfvec"), ("binary", "bit")])
def test_pgvector_column_type_follows_the_dtype(tmp_path, minilm_engine, fresh, dtype, column_type):
    postgres = fresh
    _, part = _job(tmp_path, minilm_engine, postgres.url, output={"dtype": dtype})
    [(udt,)] = _pg(postgres, "SELECT udt_name FROM information_schema.columns WHERE table_name = 'vectors' "
                             "AND column_name = 'embedding'")
    assert udt == column_type
    stored = dict(_pg(postgres, "SELECT id, embedding::text FROM vectors"))
    vectors = codec_for(dtype).decode(part.column("embedding"), 384)
    for record_id, vector in zip(part.column("id").to_pylist(), vectors):
        if dtype == "binary":
            assert stored[record_id] == "".join("1" if value > 0 else "0" for value in vector)
        else:
            assert np.allclose(json.loads(stored[record_id]), vector, atol=1e-3)


def test_pgvector_rows_carry_typed_fields_and_the_parts_vectors(tmp_path, minilm_engine, fresh):
    postgres = fresh
    documents = [{**d, "fields": {"topic": f"t{i % 3}", "rank": i}} for i, d in enumerate(DOCUMENTS)]
    _, part = _job(tmp_path, minilm_engine, postgres.url, documents,
                   output={"include_fields": ["topic", "rank"]})
    types = dict(_pg(postgres, "SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = 'vectors'"))
    assert (types["embedding"], types["topic"], types["rank"], types["chunk_index"]) == ("vector", "text", "int8", "int4")
    first = part.slice(0, 1).to_pylist()[0]
    [(vector, topic, rank)] = _pg(postgres, f"SELECT embedding::text, topic, rank FROM vectors "
                                                  f"WHERE id = '{first['id']}' AND chunk_index = 0")
    assert np.allclose(json.loads(vector), first["embedding"], atol=1e-6)
    assert (topic, rank) == (first["topic"], first["rank"])


def test_pgvector_sparsevec_holds_the_sparse_weights(tmp_path, minilm_engine, fresh):
    postgres = fresh
    _, part = _job(tmp_path, minilm_engine, postgres.url, model="splade-tiny",
                   task="sparse_embed")
    [(udt,)] = _pg(postgres, "SELECT udt_name FROM information_schema.columns WHERE table_name = 'vectors' "
                             "AND column_name = 'sparse_embedding'")
    assert udt == "sparsevec"
    stored = dict(_pg(postgres, "SELECT id, sparse_embedding::text FROM vectors"))
    row = part.slice(0, 1).to_pylist()[0]
    weights = dict(item.split(":") for item in stored[row["id"]].split("}")[0].strip("{").split(","))
    assert {int(index) - 1 for index in weights} == set(row["sparse_indices"])  # sparsevec is 1-based
    assert [float(weights[str(i + 1)]) for i in row["sparse_indices"]] == pytest.approx(row["sparse_values"], rel=1e-6)


def test_qdrant_points_carry_sparse_and_multi_vectors(tmp_path, minilm_engine):
    path = tmp_path / "qdrant"
    _, part = _job(tmp_path, minilm_engine, f"qdrant+local://{path}", task="token_embed")
    client = QdrantClient(path=str(path))
    try:
        row = part.slice(0, 1).to_pylist()[0]
        [point] = client.retrieve("vectors", [point_id((row["id"], 0))], with_vectors=True, with_payload=True)
    finally:
        client.close()
    assert point.payload["id"] == row["id"] and point.payload["content_hash"] == row["content_hash"]
    assert np.allclose(point.vector["multi"], np.array(row["token_embeddings"]) / np.linalg.norm(
        row["token_embeddings"], axis=1, keepdims=True), atol=1e-5)  # cosine collections keep unit vectors


def test_qdrant_sparse_points(tmp_path, minilm_engine):
    path = tmp_path / "qdrant"
    _, part = _job(tmp_path, minilm_engine, f"qdrant+local://{path}", model="splade-tiny", task="sparse_embed")
    client = QdrantClient(path=str(path))
    try:
        row = part.slice(0, 1).to_pylist()[0]
        [point] = client.retrieve("vectors", [point_id((row["id"], 0))], with_vectors=True)
    finally:
        client.close()
    assert point.vector["sparse"].indices == row["sparse_indices"]
    assert point.vector["sparse"].values == pytest.approx(row["sparse_values"])


def test_lancedb_keeps_token_vectors_and_float16(tmp_path, minilm_engine):
    _, part = _job(tmp_path, minilm_engine, f"lancedb://{tmp_path}/lance", output={"dtype": "float16"})
    table = lancedb.connect(f"{tmp_path}/lance").open_table("vectors").to_arrow().sort_by("id")
    assert str(table.schema.field("embedding").type) == "fixed_size_list<item: halffloat>[384]"
    assert np.allclose(np.array(table.column("embedding").to_pylist()),
                       codec_for("float16").decode(part.column("embedding"), 384), atol=1e-3)

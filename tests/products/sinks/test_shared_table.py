"""One table shared by two jobs of one tenant and by two tenants, in every store (the in-process one,
LanceDB on disk, Qdrant in local mode, PostgreSQL with pgvector started here): a load deletes only
rows its own lineage wrote (the job and the jobs it continues through incremental_from), writes over
no other job's row (a job whose ids another lineage holds is refused before writing anything), and
the store enforces it too, whatever load it is handed. A table made before rows had owners keeps
every row that no load writes again.

The jobs run once, with the real model; each test loads their parts into a fresh table.
"""
import uuid
from types import SimpleNamespace

import lancedb
import numpy as np
import psycopg
import pyarrow as pa
import pytest
from qdrant_client import QdrantClient, models
from support.job_doubles import RecordingEnqueuer, drain

from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.steps.submit import submit_job
from poolq.products.sinks.sink import RowOwner, SinkError, SinkLoad, SinkSchema
from poolq.products.sinks.sink_factory import open_sink
from poolq.products.sinks.sink_load import load_into
from poolq.products.sinks.stores.memory_sink import MemorySink
from poolq.products.sinks.stores.qdrant_sink import point_id
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

MODEL, DIMENSIONS = "all-MiniLM-L6-v2", 384
ACME, GLOBEX = "acme", "globex"
JOB_STEPS = frozenset({"plan", "plan_section", "shard", "finalize"})
DENSE = SinkSchema(dense_dtype="float32", dimensions=DIMENSIONS)
KINDS = ["memory", "lancedb", "qdrant", pytest.param("pgvector", marks=pytest.mark.integration)]


def _run(ctx, tenant: str, texts: dict[str, str], incremental_from: str | None = None) -> JobHandle:
    documents = [{"id": doc_id, "text": text} for doc_id, text in texts.items()]
    spec = JobSpec.model_validate({"input": {"documents": documents}, "sink": "search", "incremental_from": incremental_from})
    job = JobHandle.bind(ctx, submit_job(ctx, spec, tenant=tenant).id)
    drain(ctx, only=JOB_STEPS)
    ctx.enqueuer.take()  # each test loads the parts itself
    return job


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, minilm_engine):
    root = tmp_path_factory.mktemp("shared-table")
    settings = Settings(sinks={"search": f"memory://{root.name}"}, sink_grants={ACME: ["search"], GLOBEX: ["search"]})
    ctx = local_context(root / "out", settings)
    ctx.engines.use(MODEL, minilm_engine)
    ctx.enqueuer = RecordingEnqueuer()
    first = {"a0": "apples are red", "a1": "bananas are yellow", "a2": "cherries are dark"}
    a = _run(ctx, ACME, first)
    return SimpleNamespace(
        ctx=ctx, a=a,
        b=_run(ctx, ACME, {"b0": "another job of the same tenant", "b1": "with ids of its own"}),
        c=_run(ctx, GLOBEX, {"c0": "another tenant's document", "c1": "and its second one"}),
        # a's next run (as a schedule's next run is): a0 edited, a2 gone
        a_next=_run(ctx, ACME, {"a0": "apples are green", "a1": first["a1"]}, incremental_from=a.id),
        d=_run(ctx, GLOBEX, {"a0": "another tenant's document that happens to be named a0"}),
        same=_run(ctx, ACME, {"c0": "another tenant's document"}),  # the very row globex's c0 is
    )


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=KINDS)
def table(request, tmp_path, jobs):
    """A fresh table of one store: ``settings`` name it as sink ``search``."""
    kind = request.param
    url = {"memory": f"memory://{tmp_path.name}", "lancedb": f"lancedb://{tmp_path}/lance",
           "qdrant": f"qdrant+local://{tmp_path}/qdrant",
           "pgvector": request.getfixturevalue("postgres").url if kind == "pgvector" else ""}[kind]
    name = f"shared_{kind}_{uuid.uuid4().hex[:8]}"  # one PostgreSQL serves the module
    return SimpleNamespace(kind=kind, url=url, name=name, path=tmp_path,
                           settings=Settings(sinks={"search": {"url": url, "table": name}}))


def _load(table, job: JobHandle):
    return load_into(job, job.ledger.manifest(), "search", table.settings)


def _stored(table) -> dict[tuple[str, int], tuple]:
    sink = open_sink("search", table.settings)
    try:
        keys = sink.stored_keys().to_pylist()
    finally:
        sink.close()
    return {(row["id"], row["chunk_index"]): (row["content_hash"], row["poolq_tenant"], row["poolq_lineage"])
            for row in keys}


def _rows(job: JobHandle, lineage: JobHandle | None = None) -> dict[tuple[str, int], tuple]:
    """The job's rows as the table must hold them: its hashes, its tenant and lineage."""
    rows = {}
    for part in job.ledger.manifest().parts:
        table = read_embeddings(job.ctx.store.get(part.key), columns=["id", "content_hash"])
        for record_id, digest in zip(table.column("id").to_pylist(), table.column("content_hash").to_pylist()):
            rows[(record_id, 0)] = (digest, job.tenant, (lineage or job).id)
    return rows


def test_two_jobs_and_two_tenants_in_one_table_never_delete_each_others_rows(table, jobs):
    for job in (jobs.a, jobs.b, jobs.c):
        assert _load(table, job).stale == frozenset()
    everyone = _rows(jobs.a) | _rows(jobs.b) | _rows(jobs.c)
    assert _stored(table) == everyone

    again = _load(table, jobs.b)  # `POST /v1/jobs/{b}/sinks/retry`: the other jobs' rows are not b's
    assert (again.stale, again.upserted, again.unchanged) == (frozenset(), 0, 2)
    assert _stored(table) == everyone


def test_a_lineage_deletes_its_own_gone_documents_only(table, jobs):
    for job in (jobs.a, jobs.b, jobs.c):
        _load(table, job)
    plan = _load(table, jobs.a_next)
    assert plan.stale == {("a2", 0)} and plan.changed == {"a0"}
    assert _stored(table) == _rows(jobs.a_next, lineage=jobs.a) | _rows(jobs.b) | _rows(jobs.c)


def test_a_job_whose_ids_another_lineage_holds_otherwise_is_refused_before_writing(table, jobs):
    for job in (jobs.a, jobs.c):
        _load(table, job)
    before = _stored(table)
    with pytest.raises(SinkError, match=r"1 rows of this job have keys that another job's rows hold.*'a0' \(chunk 0\)"):
        _load(table, jobs.d)  # another tenant's job with a document named a0
    assert _stored(table) == before
    same = _load(table, jobs.same)  # the same row as one another lineage holds: left as it is, and theirs
    assert (same.upserted, same.unchanged, same.stale, same.foreign) == (0, 1, frozenset(), frozenset())
    assert _stored(table) == before


def _forged(owner: RowOwner, *ids: str) -> pa.Table:
    """Rows of ``owner`` in the jobs' shape (384 float32 dimensions), whatever they say."""
    vector = np.full(DIMENSIONS, 1 / np.sqrt(DIMENSIONS), np.float32)
    return pa.Table.from_pylist([{"id": record_id, "chunk_index": 0, "content_hash": "forged", "vector_origin": "forged",
                                  "poolq_tenant": owner.tenant, "poolq_lineage": owner.lineage, "embedding": vector.tolist()}
                                 for record_id in ids], schema=DENSE.arrow_schema())


def test_the_store_itself_never_deletes_or_overwrites_another_owners_rows(table, jobs):
    for job in (jobs.a, jobs.c):
        _load(table, job)
    globex = RowOwner(GLOBEX, jobs.c.id)
    everything = frozenset(_stored(table))  # a load that asks to delete every row, and to write over a0
    sink = open_sink("search", table.settings)
    try:
        sink.apply(SinkLoad(schema=DENSE, owner=globex, rows=[_forged(globex, "a0", "z0")], stale=everything))
    finally:
        sink.close()
    assert _stored(table) == _rows(jobs.a) | {("z0", 0): ("forged", GLOBEX, jobs.c.id)}  # only globex's own rows went


def test_a_table_made_before_rows_had_owners_keeps_every_row_no_load_writes(table, jobs):
    LEGACY_TABLES[table.kind](table, {("a1", 0): "old-a1", ("old-0", 0): "old-0"})
    assert _stored(table) == {("a1", 0): ("old-a1", None, None), ("old-0", 0): ("old-0", None, None)}
    _load(table, jobs.a)  # writes over its own key a1 (taking it over), leaves old-0
    assert _stored(table) == _rows(jobs.a) | {("old-0", 0): ("old-0", None, None)}
    plan = _load(table, jobs.a_next)  # a2 gone: deleted; old-0 is no lineage's: kept
    assert plan.stale == {("a2", 0)}
    assert _stored(table) == _rows(jobs.a_next, lineage=jobs.a) | {("old-0", 0): ("old-0", None, None)}


def _legacy_rows(hashes: dict[tuple[str, int], str]) -> list[dict]:
    vector = (np.ones(DIMENSIONS, np.float32) / np.sqrt(DIMENSIONS)).tolist()
    return [{"id": record_id, "chunk_index": index, "content_hash": digest, "vector_origin": "an older poolq",
             "embedding": vector} for (record_id, index), digest in hashes.items()]


def _legacy_memory(table, hashes) -> None:
    MemorySink.named(table.path.name).rows.update({(row["id"], row["chunk_index"]): row for row in _legacy_rows(hashes)})


def _legacy_lancedb(table, hashes) -> None:
    schema = pa.schema([pa.field("id", pa.string()), pa.field("chunk_index", pa.int32()), pa.field("content_hash", pa.string()),
                        pa.field("vector_origin", pa.string()), pa.field("embedding", pa.list_(pa.float32(), DIMENSIONS))])
    lancedb.connect(str(table.path / "lance")).create_table(table.name, data=pa.Table.from_pylist(_legacy_rows(hashes), schema))


def _legacy_qdrant(table, hashes) -> None:
    client = QdrantClient(path=str(table.path / "qdrant"))
    try:
        client.create_collection(table.name, vectors_config={
            "dense": models.VectorParams(size=DIMENSIONS, distance=models.Distance.COSINE)})
        client.upsert(table.name, points=[
            models.PointStruct(id=point_id((row["id"], row["chunk_index"])), vector={"dense": row.pop("embedding")}, payload=row)
            for row in _legacy_rows(hashes)])
    finally:
        client.close()


def _legacy_pgvector(table, hashes) -> None:
    with psycopg.connect(table.url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE TABLE {table.name} (id text NOT NULL, chunk_index integer NOT NULL, content_hash text, "
                     f"vector_origin text, embedding vector({DIMENSIONS}), PRIMARY KEY (id, chunk_index))")
        for row in _legacy_rows(hashes):
            conn.execute(f"INSERT INTO {table.name} VALUES (%s, %s, %s, %s, %s::vector)",
                         [row["id"], row["chunk_index"], row["content_hash"], row["vector_origin"], str(row["embedding"])])


# The table as an older poolq made it: no owner columns (no owner in a point's payload).
LEGACY_TABLES = {"memory": _legacy_memory, "lancedb": _legacy_lancedb, "qdrant": _legacy_qdrant, "pgvector": _legacy_pgvector}

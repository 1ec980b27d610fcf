"""Every sink against its real store (PostgreSQL with pgvector started here on a loopback port,
a LanceDB dataset on disk, Qdrant in qdrant-client's local mode) and the in-process one: a job
loads its rows, then an incremental reindex where 10 % of the documents changed and 5 % are gone
leaves the store holding exactly the current corpus, and loading again changes nothing."""
import json
import re

import psycopg
import pyarrow as pa
import pytest

from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.local_runner import local_context, run_job_locally
from poolq.jobs.model.job_spec import JobSpec
from poolq.jobs.model.job_state import JobState
from poolq.jobs.settings import Settings
from poolq.jobs.sinks.sink_factory import open_sink
from poolq.jobs.sinks.sink_load import load_into
from poolq.storage import read_embeddings

pytestmark = pytest.mark.integration
MODEL = "all-MiniLM-L6-v2"
DOCUMENTS = 200


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def sentences(sample_documents):
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [s for s in found if 40 <= len(s) <= 300]


def _sink_url(kind, tmp_path, postgres):
    return {"memory": f"memory://{tmp_path.name}", "pgvector": postgres.url if kind == "pgvector" else "",
            "lancedb": f"lancedb://{tmp_path}/lance", "qdrant": f"qdrant+local://{tmp_path}/qdrant"}[kind]


@pytest.fixture(params=["memory", "pgvector", "lancedb", "qdrant"])
def ctx(request, tmp_path, minilm_engine):
    kind = request.param
    postgres = request.getfixturevalue("postgres") if kind == "pgvector" else None
    settings = Settings(shard_max_documents=50, sinks={"search": {"url": _sink_url(kind, tmp_path, postgres),
                                                                   "table": f"docs_{kind}"}},
                        sink_grants={"local": ["search"]})
    context = local_context(tmp_path / "out", settings)
    context.engines.use(MODEL, minilm_engine)
    context.sink_kind = kind
    return context


def _write(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path.as_uri()


def _run(ctx, uri, incremental_from=None):
    spec = JobSpec.model_validate({
        "input": {"uri": uri}, "incremental_from": incremental_from, "sink": "search",
        "long_documents": {"mode": "naive_chunks", "chunk_tokens": 24},
        "output": {"include_fields": ["topic", "rank"]},
    })
    status = run_job_locally(spec, ctx)
    assert status.status is JobState.SUCCEEDED, status.error
    return JobHandle.bind(ctx, status.id)


def _job_rows(job) -> dict[tuple[str, int], str]:
    rows = {}
    for part in job.ledger.manifest().parts:
        table = read_embeddings(job.ctx.store.get(part.key), columns=["id", "chunk_index", "content_hash"])
        rows |= {(i, c): h for i, c, h in zip(*(table.column(n).to_pylist() for n in table.column_names))}
    return rows


def _stored(ctx) -> dict[tuple[str, int], str]:
    sink = open_sink("search", ctx.settings)
    try:
        keys = sink.stored_keys()
    finally:
        sink.close()
    return {(i, c): h for i, c, h in zip(*(keys.column(n).to_pylist() for n in ("id", "chunk_index", "content_hash")))}


def test_an_incremental_reindex_leaves_exactly_the_current_corpus(ctx, tmp_path, sentences):
    docs = [{"id": f"doc-{i:03d}", "text": sentences[i], "topic": f"t{i % 3}", "rank": i} for i in range(DOCUMENTS)]
    first = _run(ctx, _write(tmp_path / "v1.jsonl", docs))
    first_rows = _job_rows(first)
    assert len(first_rows) > DOCUMENTS  # chunk rows: several per document
    [loaded] = first.ledger.manifest().sinks
    assert (loaded.name, loaded.state, loaded.upserted, loaded.deleted, loaded.unchanged) == (
        "search", "succeeded", len(first_rows), 0, 0)
    assert _stored(ctx) == first_rows
    untouched = _row_versions(ctx)

    changed = set(range(0, DOCUMENTS, 10))  # 10 %
    gone = set(range(5, DOCUMENTS, 20))  # 5 %, none of them changed
    current = [{**d, "text": _revised(d["text"], i)} if i in changed else d for i, d in enumerate(docs) if i not in gone]
    second = _run(ctx, _write(tmp_path / "v2.jsonl", current), incremental_from=first.id)
    second_rows = _job_rows(second)
    assert _stored(ctx) == second_rows  # exactly the current corpus: no stale chunk, no gone document

    changed_ids = {docs[i]["id"] for i in changed}
    gone_ids = {docs[i]["id"] for i in gone}
    [synced] = second.ledger.manifest().sinks
    assert synced.state == "succeeded"
    assert synced.upserted == sum(1 for key in second_rows if key[0] in changed_ids)
    assert synced.unchanged == sum(1 for key in second_rows if key[0] not in changed_ids)
    assert synced.deleted == (sum(1 for key in first_rows if key[0] in gone_ids)
                              + sum(1 for key in first_rows if key[0] in changed_ids and key not in second_rows))
    assert synced.deleted > sum(1 for key in first_rows if key[0] in gone_ids)  # shortened texts lost chunks...
    after = _row_versions(ctx)
    if after is not None:  # ... and the unchanged rows were not rewritten (pgvector: same xmin)
        assert {k: v for k, v in after.items() if k[0] not in changed_ids} == \
               {k: v for k, v in untouched.items() if k[0] not in changed_ids | gone_ids}

    again = load_into(second, second.ledger.manifest(), open_sink("search", ctx.settings))
    assert (again.upserted, len(again.stale), again.unchanged) == (0, 0, len(second_rows))
    assert _stored(ctx) == second_rows


def _revised(text: str, index: int) -> str:
    """Half the changed documents grow, half shrink to one chunk (their other chunks' rows go stale)."""
    return text + " And so it was revised, at some length, for the next run." if index % 20 else text[:30]


def _row_versions(ctx):
    """pgvector: each row's xmin (the transaction that last wrote it); None for other sinks."""
    if ctx.sink_kind != "pgvector":
        return None
    with psycopg.connect(ctx.settings.sinks["search"].url.get_secret_value()) as conn:
        rows = conn.execute("SELECT id, chunk_index, xmin::text FROM docs_pgvector").fetchall()
    return {(i, c): x for i, c, x in rows}


def test_pgvector_rows_carry_typed_fields_and_the_parts_vectors(ctx, tmp_path, sentences):
    if ctx.sink_kind != "pgvector":
        pytest.skip("pgvector's column types")
    docs = [{"id": f"doc-{i:03d}", "text": sentences[i], "topic": f"t{i % 3}", "rank": i} for i in range(12)]
    job = _run(ctx, _write(tmp_path / "v1.jsonl", docs))
    part = read_embeddings(ctx.store.get(job.ledger.manifest().parts[0].key))
    first = part.slice(0, 1).to_pylist()[0]
    with psycopg.connect(ctx.settings.sinks["search"].url.get_secret_value()) as conn:
        types = dict(conn.execute("SELECT column_name, udt_name FROM information_schema.columns "
                                  "WHERE table_name = 'docs_pgvector'").fetchall())
        stored = conn.execute("SELECT embedding::text, topic, rank FROM docs_pgvector WHERE id = %s AND chunk_index = %s",
                              [first["id"], first["chunk_index"]]).fetchone()
    assert types["embedding"] == "vector" and types["topic"] == "text" and types["rank"] == "int8"
    assert types["chunk_index"] == "int4"
    vector = pa.array(json.loads(stored[0]), pa.float32()).to_pylist()
    assert vector == pytest.approx(first["embedding"], abs=1e-6)
    assert stored[1:] == (first["topic"], first["rank"])

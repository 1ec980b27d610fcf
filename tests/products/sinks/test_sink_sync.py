"""Every sink against its real store (PostgreSQL with pgvector started here on a loopback port,
a LanceDB dataset on disk, Qdrant in qdrant-client's local mode) and the in-process one: a job
loads its rows, then a scheduled (incremental) reindex where 10 % of the documents changed and 5 % are gone
leaves the store holding exactly the current corpus, and loading again changes nothing."""
import json
import re
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_state import JobState
from poolq.products.schedules.schedule import ScheduleRequest
from poolq.products.schedules.schedule_admin import create_schedule
from poolq.products.schedules.schedule_runner import run_schedule
from poolq.products.sinks.sink_factory import open_sink
from poolq.products.sinks.sink_load import load_into
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

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


TEMPLATE = {"sink": "search", "long_documents": {"mode": "naive_chunks", "chunk_tokens": 24},
            "output": {"include_fields": ["topic", "rank"]}}
T0 = datetime(2026, 1, 5, 3, 0, tzinfo=timezone.utc)


def _reindex(ctx, folder, docs, schedule_id=None, day=0):
    """One scheduled run over ``folder`` (the corpus as it is now): incremental from the last run."""
    folder.mkdir(exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    if schedule_id is None:
        request = ScheduleRequest.model_validate({"cron": "0 3 * * *", "input": {"uri": folder.as_uri() + "/"},
                                                  "template": TEMPLATE})
        schedule_id = create_schedule(ctx, request).id
    run = run_schedule(ctx, schedule_id, now=T0 + timedelta(days=day), manual=False)
    status = ctx.status.get(run.job_id)
    assert status.status is JobState.SUCCEEDED, status.error
    return JobHandle.bind(ctx, run.job_id), schedule_id, run


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
    first, schedule_id, _ = _reindex(ctx, tmp_path / "corpus", docs)
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
    second, _, run = _reindex(ctx, tmp_path / "corpus", current, schedule_id, day=1)
    assert run.incremental_from == first.id
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

    again = load_into(second, second.ledger.manifest(), "search", ctx.settings)
    assert (again.upserted, len(again.stale), again.unchanged) == (0, 0, len(second_rows))
    assert _stored(ctx) == second_rows


def _revised(text: str, index: int) -> str:
    """Half the changed documents grow, half shrink to one chunk (their other chunks' rows go stale)."""
    return text + " And so it was revised, at some length, for the next run." if index % 20 else text[:30]


def _row_versions(ctx):
    """pgvector: each row's xmin (the transaction that last wrote it); None for other sinks."""
    if ctx.sink_kind != "pgvector":
        return None
    with psycopg.connect(ctx.settings.vector_sinks.sinks["search"].url.get_secret_value()) as conn:
        rows = conn.execute("SELECT id, chunk_index, xmin::text FROM docs_pgvector").fetchall()
    return {(i, c): x for i, c, x in rows}

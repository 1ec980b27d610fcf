"""What a load must do, decided from keys alone; the in-process sink applies it like the real ones
(tests/products/sinks/test_sink_sync.py runs all of them end to end)."""
import pyarrow as pa
import pytest

from poolq.jobs.settings import Settings
from poolq.jobs.sink_settings import SinkConfig
from poolq.products.sinks.sink import STORED_KEYS_SCHEMA, RowOwner, SinkError, SinkLoad, SinkSchema
from poolq.products.sinks.sink_load import scrub
from poolq.products.sinks.stores.memory_sink import MemorySink
from poolq.products.sinks.sync_plan import plan_sync

OWNER = RowOwner("acme", "lineage-1")


def _keys(*rows, owner: RowOwner | None = OWNER):
    """Rows ``(id, chunk_index, content_hash, vector_origin)`` of ``owner`` (None: rows without one)."""
    owned = [(*row, owner.tenant, owner.lineage) if owner else row for row in rows]
    return pa.Table.from_pylist([dict(zip(STORED_KEYS_SCHEMA.names, row)) for row in owned], schema=STORED_KEYS_SCHEMA)


def test_unchanged_changed_gone_and_stale_chunks():
    stored = _keys(("same", 0, "h", "o"), ("edited", 0, "old", "o"), ("edited", 1, "old", "o"), ("edited", 2, "old", "o"),
                   ("gone", 0, "h", "o"), ("failed", 0, "h", "o"), ("remodelled", 0, "h", "old-model"))
    current = _keys(("same", 0, "h", "o"), ("edited", 0, "new", "o"), ("edited", 1, "new", "o"), ("new", 0, "h", "o"),
                    ("remodelled", 0, "h", "o"))
    plan = plan_sync(stored, current, OWNER, kept=frozenset({"failed"}))
    assert plan.changed == {"edited", "new", "remodelled"}
    assert plan.stale == {("edited", 2), ("gone", 0)}  # the failed document keeps its row
    assert (plan.upserted, plan.unchanged) == (4, 1)


def test_a_half_loaded_document_is_loaded_again():
    """An interrupted load left one of a document's two chunks: the document counts as changed."""
    plan = plan_sync(_keys(("doc", 0, "h", "o")), _keys(("doc", 0, "h", "o"), ("doc", 1, "h", "o")), OWNER)
    assert plan.changed == {"doc"} and plan.upserted == 2 and not plan.stale


def test_in_sync_means_nothing_to_do():
    rows = _keys(("a", 0, "h", "o"), ("a", 1, "h", "o"), ("b", 0, "g", "o"))
    plan = plan_sync(rows, rows, OWNER)
    assert (plan.changed, plan.stale, plan.upserted, plan.unchanged) == (frozenset(), frozenset(), 0, 3)


def test_only_the_owners_rows_are_compared_and_deleted():
    """Another lineage's rows (same tenant or not) are never stale; where they hold a key of the job,
    identical rows are left as theirs and count unchanged, other rows are foreign (the load is refused);
    rows without an owner are written over where the job has their key, and never deleted."""
    same_tenant, other_tenant = RowOwner("acme", "lineage-2"), RowOwner("globex", "lineage-1")
    stored = pa.concat_tables([
        _keys(("mine", 0, "h", "o"), ("mine-gone", 0, "h", "o")),
        _keys(("theirs", 0, "h", "o"), ("same", 0, "h", "o"), owner=same_tenant),
        _keys(("clash", 0, "h", "o"), ("other", 0, "h", "o"), owner=other_tenant),
        _keys(("legacy", 0, "old", "o"), ("legacy-gone", 0, "h", "o"), owner=None),
    ])
    current = _keys(("mine", 0, "h", "o"), ("same", 0, "h", "o"), ("clash", 0, "edited", "o"), ("legacy", 0, "h", "o"))
    plan = plan_sync(stored, current, OWNER)
    assert plan.stale == {("mine-gone", 0)}
    assert plan.foreign == {("clash", 0)}
    assert plan.changed == {"clash", "legacy"} and plan.unchanged == 2  # mine and same


def test_the_memory_sink_applies_a_load_and_refuses_a_missing_table():
    schema = SinkSchema()
    batch = _keys(("a", 0, "h", "o"))
    sink = MemorySink({}, create_table=True)
    sink.apply(SinkLoad(schema, OWNER, [batch]))
    sink.apply(SinkLoad(schema, OWNER, [batch]))  # idempotent
    assert sink.stored_keys().to_pylist() == batch.to_pylist()
    sink.apply(SinkLoad(schema, OWNER, [], frozenset({("a", 0)})))
    assert sink.stored_keys().num_rows == 0
    with pytest.raises(SinkError, match="does not exist"):
        MemorySink({}, create_table=False).apply(SinkLoad(schema, OWNER, [batch]))


def test_errors_lose_the_credentials_and_settings_never_print_them():
    url = "postgresql://loader:hunter2-secret@db.internal/search"
    settings = Settings(sinks={"db": url})
    assert scrub(f"could not connect to {url}: password hunter2-secret refused", settings) == \
        "could not connect to <sink url>: password *** refused"
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.vector_sinks.sinks)
    assert settings.vector_sinks.sinks["db"] == SinkConfig(url=url)  # a bare string is the URL, with the defaults


def test_every_scheme_has_an_opener_and_no_driver_loads_with_the_jobs_layer():
    import subprocess
    import sys

    from poolq.products.sinks.configured_sinks import SCHEMES
    from poolq.products.sinks.sink_factory import OPENERS

    assert set(OPENERS) == set(SCHEMES)
    # Planning, the API and a worker with no sink never import a store's driver (~100 MB together).
    probe = ("import sys; import poolq.worker.local_runner, poolq.worker.celery_tasks; "
             "print(sorted(m for m in ('lancedb', 'qdrant_client', 'psycopg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

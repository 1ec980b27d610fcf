"""Content-addressed reuse in process (the in-memory stack, the real MiniLM engine): repeats are
computed once, every row equals a fresh computation, a tenant reuses only its own outputs."""
import json
import re

import numpy as np
import pytest
from support.engine_doubles import CountingEngine
from support.job_doubles import RecordingEnqueuer, drain

from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.reuse.reuse_plan import spill_digits
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.submit import submit_job
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def ctx(tmp_path, minilm_engine):
    context = local_context(tmp_path / "out", Settings(shard_max_documents=4, shard_max_chars=20_000))
    context.engines.use(MODEL, CountingEngine(minilm_engine))
    return context


@pytest.fixture(scope="module")
def sentences(sample_documents):
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [s for s in found if 40 <= len(s) <= 300]


def _write(tmp_path, name, docs):
    path = tmp_path / name
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path.as_uri()


def _run(ctx, uri, tenant="local", **options):
    spec = JobSpec.model_validate({"model": MODEL, "input": {"uri": uri}, **options})
    job = submit_job(ctx, spec, tenant=tenant)
    handle = JobHandle.of_tenant(ctx, job.id, tenant)
    manifest = handle.ledger.manifest()
    assert manifest is not None and manifest.status is JobState.SUCCEEDED, manifest
    rows = {}
    for part in manifest.parts:
        for row in read_embeddings(ctx.store.get(part.key)).to_pylist():
            rows[row["id"]] = row
    return manifest, rows


def _keys(ctx):
    return ctx.engines.get(MODEL).keys


def test_half_duplicates_are_computed_once_and_each_row_equals_a_fresh_one(ctx, tmp_path, sentences):
    distinct = sentences[:12]
    # 24 records, 12 texts: each text twice, the second copy far away (another shard, usually another section's)
    docs = [{"id": f"a{i:02d}", "text": t} for i, t in enumerate(distinct)] + \
           [{"id": f"b{i:02d}", "text": t} for i, t in enumerate(reversed(distinct))]
    manifest, rows = _run(ctx, _write(tmp_path, "dups.jsonl", docs))
    assert len(_keys(ctx)) == 12  # the engine was asked for each text once
    assert manifest.shards.total == 6 and manifest.counts.completed == 24 and len(rows) == 24
    fresh_manifest, fresh = _run(ctx, _write(tmp_path, "fresh.jsonl", docs[:12]))
    for doc in docs:
        twin = "a" + doc["id"][1:] if doc["id"].startswith("a") else f"a{11 - int(doc['id'][1:]):02d}"
        assert rows[doc["id"]]["embedding"] == fresh[twin]["embedding"]  # bit-identical, not close
        assert rows[doc["id"]]["content_hash"] == fresh[twin]["content_hash"]
    reuse = manifest.reuse
    assert reuse.reused_documents == 12 and reuse.computed_tokens == fresh_manifest.usage.tokens
    assert reuse.reused_tokens == reuse.computed_tokens == manifest.usage.tokens


def test_the_status_shows_what_reuse_saved_and_keeps_it_when_rebuilt_from_the_ledger(ctx, tmp_path, sentences):
    docs = [{"id": f"r{i}", "text": t} for i, t in enumerate(sentences[:3] * 2)]
    manifest, _ = _run(ctx, _write(tmp_path, "twice.jsonl", docs))
    job = JobHandle.bind(ctx, manifest.job_id)
    assert current_status(job).reuse == manifest.reuse and manifest.reuse.reused_documents == 3
    ctx.status = InMemoryJobStatusStore()  # Redis lost everything: the ledger has the truth
    assert current_status(job).reuse == manifest.reuse


def test_the_status_counts_what_reuse_saved_while_the_job_runs(ctx, tmp_path, sentences):
    ctx.enqueuer = RecordingEnqueuer()  # tasks run when drained: the job can be looked at before its finalizer
    docs = [{"id": f"r{i}", "text": t} for i, t in enumerate(sentences[:4] * 2)]
    spec = JobSpec.model_validate({"model": MODEL, "input": {"uri": _write(tmp_path, "twice.jsonl", docs)}})
    job = JobHandle.bind(ctx, submit_job(ctx, spec).id)
    assert current_status(job).reuse is None  # nothing counted yet
    drain(ctx, only=frozenset({"plan", "plan_section", "shard"}))
    running = current_status(job)
    assert running.status is JobState.RUNNING and running.reuse.reused_documents == 4
    assert running.reuse.computed_tokens == running.usage.tokens > 0
    drain(ctx)
    assert current_status(job).reuse == job.ledger.manifest().reuse == running.reuse


def test_repeats_across_sections_are_computed_once(tmp_path, minilm_engine, sentences):
    """Sections of ~1 KiB: the first copies and their repeats are in different sections (each
    planned by its own task), and still each text is computed once."""
    context = local_context(tmp_path / "out", Settings(shard_max_documents=3, plan_section_bytes=1024))
    context.engines.use(MODEL, CountingEngine(minilm_engine))
    docs = [{"id": f"x{i:02d}", "text": t} for i, t in enumerate(sentences[:9] * 3)]
    manifest, rows = _run(context, _write(tmp_path, "sections.jsonl", docs))
    sections = [key for key in context.store.list("") if key.endswith(".reuse.parquet")]  # one per section
    assert len(sections) >= 3 and manifest.shards.total >= 9 and len(_keys(context)) == 9
    assert manifest.reuse.reused_documents == 18 and len(rows) == 27
    for i, doc in enumerate(docs):
        assert rows[doc["id"]]["embedding"] == rows[f"x{i % 9:02d}"]["embedding"]


def test_spill_files_grow_with_the_input_only():
    assert spill_digits(10 << 20, 16 << 20) == 2  # a small input: 256 files
    assert spill_digits(10 << 30, 16 << 20) == 3  # 10 GiB: 4,096 files of ~2.5 MiB
    assert spill_digits(1 << 50, 16 << 20) == 4  # never more than 65,536


def test_a_tenant_reuses_its_earlier_job_and_another_tenant_nothing(ctx, tmp_path, sentences):
    docs = [{"id": f"d{i:02d}", "text": t} for i, t in enumerate(sentences[:10])]
    uri = _write(tmp_path, "docs.jsonl", docs)
    first, first_rows = _run(ctx, uri, tenant="acme", reuse="tenant")
    assert len(_keys(ctx)) == 10 and first.reuse.reused_documents == 0
    second, second_rows = _run(ctx, uri, tenant="acme", reuse="tenant")
    assert len(_keys(ctx)) == 10  # nothing computed again
    assert second.reuse.computed_tokens == 0 and second.reuse.reused_documents == 10
    assert second.reuse.reused_tokens == first.reuse.computed_tokens
    assert second_rows == first_rows
    other, _ = _run(ctx, uri, tenant="globex", reuse="tenant")
    assert len(_keys(ctx)) == 20 and other.reuse.reused_documents == 0
    assert other.reuse.computed_tokens == first.reuse.computed_tokens


def test_reuse_job_keeps_nothing_for_later_jobs(ctx, tmp_path, sentences):
    uri = _write(tmp_path, "docs.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(sentences[:5])])
    _run(ctx, uri, tenant="acme")
    second, _ = _run(ctx, uri, tenant="acme", reuse="tenant")
    assert second.reuse.reused_documents == 0 and len(_keys(ctx)) == 10


def test_other_options_are_not_reused(ctx, tmp_path, sentences):
    uri = _write(tmp_path, "docs.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(sentences[:5])])
    _run(ctx, uri, tenant="acme", reuse="tenant")
    truncated, _ = _run(ctx, uri, tenant="acme", reuse="tenant", long_documents={"mode": "truncate"})
    assert truncated.reuse.reused_documents == 0 and len(_keys(ctx)) == 10
    np.testing.assert_equal(truncated.counts.completed, 5)


def test_a_webhook_changes_no_output_so_the_same_documents_are_reused(tmp_path, minilm_engine, sentences):
    context = local_context(tmp_path / "out", Settings(shard_max_documents=4, webhook_allow="https://hooks.example.com"))
    context.engines.use(MODEL, CountingEngine(minilm_engine))
    uri = _write(tmp_path, "docs.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(sentences[:4])])
    first, first_rows = _run(context, uri, tenant="acme", reuse="tenant")
    hooked, hooked_rows = _run(context, uri, tenant="acme", reuse="tenant", webhook={"url": "https://hooks.example.com/j"})
    assert hooked.reuse.reused_documents == 4 and hooked.reuse.computed_tokens == 0 and len(_keys(context)) == 4
    again, _ = _run(context, uri, tenant="acme", reuse="tenant")  # and back: the webhook job's outputs serve it
    assert again.reuse.reused_documents == 4 and again.reuse.computed_tokens == 0
    assert hooked_rows == first_rows


def test_only_results_someone_reads_are_encoded(ctx, tmp_path, sentences, monkeypatch):
    """Encoding a result for the reuse store is per-document work in the shard's loop: a job-scoped
    reuse encodes only the texts another shard follows, the tenant's reuse every text it computed."""
    import poolq.jobs.reuse.shard_reuse as shard_reuse

    encoded: list[int] = []
    encode = shard_reuse.encode_result
    monkeypatch.setattr(shard_reuse, "encode_result", lambda result: encoded.append(1) or encode(result))
    distinct = [{"id": f"u{i:02d}", "text": t} for i, t in enumerate(sentences[:8])]
    _run(ctx, _write(tmp_path, "distinct.jsonl", distinct))
    assert encoded == []  # nothing repeats: nobody reads a result back
    repeated = distinct + [{"id": f"v{i:02d}", "text": d["text"]} for i, d in enumerate(distinct[:4])]
    manifest, _ = _run(ctx, _write(tmp_path, "repeated.jsonl", repeated))
    assert manifest.reuse.reused_documents == 4 and 0 < len(encoded) <= 4  # the followed texts' owners only
    encoded.clear()
    _run(ctx, _write(tmp_path, "tenant.jsonl", [{"id": f"t{i}", "text": f"tenant text {i}"} for i in range(5)]),
         tenant="acme", reuse="tenant")
    assert len(encoded) == 5

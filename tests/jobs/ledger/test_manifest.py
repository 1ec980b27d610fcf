"""The typed manifest: what the finalizer writes is what every reader parses, old manifests included."""
import json

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.layout import JobLayout, ShardObjectKind, parse_shard_object
from poolq.jobs.ledger.manifest import MANIFEST_VERSION, JobManifest
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.worker.local_runner import run_job_locally

# A manifest exactly as poolq wrote it before the manifest was a model (version 2, int8 output).
WRITTEN_BY_V2 = {
    "version": 2, "job_id": "0193b2c4d5e6f708a9b0c1d2e3f40516", "status": "partially_succeeded",
    "model": "all-MiniLM-L6-v2", "task": "embed", "options": {"model": "all-MiniLM-L6-v2", "task": "embed"},
    "engines": ["sha256:abc/float32"], "columns": ["id", "embedding", "num_tokens", "content_hash"], "dimensions": 384,
    "output": {"format": "parquet", "dimensions": 384, "dtype": "int8", "min": -1.0, "max": 1.0,
               "scale": 0.00784313725490196, "zero_point": 0},
    "counts": {"total": 3, "completed": 2, "failed": 1, "not_processed": 0, "carried": 0, "rows": 2},
    "shards": {"total": 1, "committed": 1, "gave_up": 0}, "usage": {"tokens": 41},
    "parts": [{"key": "jobs/t/j/parts/part-00000.a1.parquet", "uri": "s3://b/jobs/t/j/parts/part-00000.a1.parquet",
               "rows": 2, "shard": 0}],
    "errors": {"key": "jobs/t/j/errors.jsonl", "uri": "s3://b/jobs/t/j/errors.jsonl", "count": 1},
    "created_at": "2026-11-30T10:00:00.000001+00:00", "started_at": "2026-11-30T10:00:01+00:00",
    "finished_at": "2026-11-30T10:00:03+00:00", "timings": {"queued_s": 1.0, "running_s": 2.0}, "error": None,
}


def test_a_manifest_written_by_the_previous_version_loads_with_its_fields():
    manifest = JobManifest.model_validate(WRITTEN_BY_V2)
    assert manifest.status is JobState.PARTIALLY_SUCCEEDED
    assert (manifest.counts.completed, manifest.counts.failed, manifest.usage.tokens) == (2, 1, 41)
    assert manifest.parts[0].shard == 0 and manifest.errors.count == 1
    assert (manifest.output.dtype, manifest.output.min, manifest.output.zero_point) == ("int8", -1.0, 0)


def test_writing_it_back_keeps_every_field_and_adds_no_absent_codec_fields():
    # Given the v2 manifest parsed, When it is dumped to JSON again
    dumped = JobManifest.model_validate(WRITTEN_BY_V2).model_dump(mode="json")
    # Then it has the same keys at every level, and parses to the same model
    assert dumped.keys() == WRITTEN_BY_V2.keys()
    assert dumped["output"].keys() == WRITTEN_BY_V2["output"].keys()
    assert dumped["counts"] == WRITTEN_BY_V2["counts"]
    assert JobManifest.model_validate(dumped) == JobManifest.model_validate(WRITTEN_BY_V2)


def test_a_float32_output_block_names_no_int8_parameters():
    raw = {**WRITTEN_BY_V2, "output": {"format": "parquet", "dimensions": 384, "dtype": "float32"}}
    assert JobManifest.model_validate(raw).model_dump(mode="json")["output"] == raw["output"]


def test_fields_a_newer_version_adds_are_kept_not_refused():
    raw = {**WRITTEN_BY_V2, "version": 3, "lineage": {"from": "x"}}
    assert JobManifest.model_validate(raw).model_dump(mode="json")["lineage"] == {"from": "x"}


def test_the_finalizer_writes_a_manifest_the_model_reads_back(local_ctx):
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"documents": [
        {"id": "a", "text": "one document"}, {"id": "b", "text": "another one"}]}}))
    stored = json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))
    manifest = JobHandle.bind(local_ctx, status.id).ledger.manifest()
    assert stored["version"] == MANIFEST_VERSION == manifest.version
    assert manifest.status is JobState.SUCCEEDED and manifest.counts.rows == 2
    assert [part.rows for part in manifest.parts] == [2] and manifest.output.dtype == "float32"
    assert "min" not in stored["output"]


def test_shard_object_keys_are_parsed_where_they_are_built():
    layout = JobLayout("jobs/tenants/t/jobs", "j1")
    assert parse_shard_object(layout.shard_commit(7)).kind is ShardObjectKind.COMMIT
    errors = parse_shard_object(layout.attempt_errors(123456, "att9"))
    assert (errors.kind, errors.shard, errors.attempt) == (ShardObjectKind.ATTEMPT_ERRORS, 123456, "att9")
    part = parse_shard_object(layout.attempt_part(3, "x1"))
    assert (part.kind, part.shard, part.attempt) == (ShardObjectKind.ATTEMPT_PART, 3, "x1")
    # a shard's input lives with planning's objects, not among the shard objects listed for commits
    assert layout.shard_input(2, 5).startswith(layout.planning_prefix) and parse_shard_object(layout.shard_input(2, 5)) is None
    assert parse_shard_object(layout.plan) is None and parse_shard_object(layout.carried_part(0)) is None


def test_a_carried_part_has_no_shard_field():
    raw = {**WRITTEN_BY_V2, "parts": [{"key": "k", "uri": "s3://b/k", "rows": 5}]}
    assert JobManifest.model_validate(raw).model_dump(mode="json")["parts"] == raw["parts"]


def test_an_embed_manifest_names_no_labels(local_ctx):
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "one"}]}}))
    assert "labels" not in json.loads(local_ctx.store.get(JobHandle.bind(local_ctx, status.id).layout.manifest))["output"]


def test_a_worker_without_the_jobs_model_still_writes_the_failed_manifest(local_ctx, monkeypatch):
    # Given a job the API accepted, on a worker whose registry lacks its model
    from poolq.engine import UnknownModelError
    from poolq.jobs.steps import submit

    accept = submit.validate_spec

    def accept_then_lose_the_model(ctx, spec):
        accepted = accept(ctx, spec)

        def unknown(name, *args, **kwargs):
            raise UnknownModelError(f"unknown model {name!r}; known models: (none)")
        for method in ("spec", "resolve", "fingerprint", "load"):
            monkeypatch.setattr(ctx.registry, method, unknown, raising=False)
        return accepted

    monkeypatch.setattr(submit, "validate_spec", accept_then_lose_the_model)
    # When it runs
    status = run_job_locally(local_ctx, JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "one"}]}}))
    # Then the ledger's verdict is written: failed, naming the model, with no parts and no columns
    manifest = JobHandle.bind(local_ctx, status.id).ledger.manifest()
    assert manifest is not None and manifest.status is JobState.FAILED
    assert "unknown model 'all-MiniLM-L6-v2'" in manifest.errors.samples[0]
    assert manifest.parts == [] and manifest.columns == []

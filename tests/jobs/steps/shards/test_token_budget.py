"""A job's token budget in process (the real MiniLM engine, the products' hooks): refused at submit
by the exact count of a small input, stopped mid-job with every record accounted for once, reused
tokens free; the operator's per-job default and ceiling, and the tenant's daily ceiling."""
import json
from datetime import datetime, timezone

import pytest

from poolq.engine import EngineConfig, PoolingEngine
from poolq.jobs.coordination.tenant_day_usage import seconds_to_day_end
from poolq.jobs.inputs.shard_input import InputFields, ShardInput, read_shard_records
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.submit import DailyTokensExhausted, JobRejected, submit_job
from poolq.storage import read_embeddings
from poolq.worker.local_runner import local_context

MODEL = "all-MiniLM-L6-v2"


def _ctx(tmp_path, engine, **settings):
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, shard_max_chars=200_000, **settings))
    ctx.engines.use(MODEL, engine)
    return ctx


def _spec(documents, **options) -> JobSpec:
    return JobSpec.model_validate({"model": MODEL, "input": {"documents": documents}, **options})


def _sentences(sample_documents, count: int) -> list[dict]:
    words = " ".join(d["text"] for d in sample_documents).split()
    return [{"id": f"s{i:02d}", "text": " ".join(words[i * 30:(i + 1) * 30])} for i in range(count)]


def _finished(ctx, status, tenant="local"):
    job = JobHandle.of_tenant(ctx, status.id, tenant)
    return job, job.ledger.manifest()


def test_a_job_over_its_budget_is_refused_at_submit_by_the_exact_count(tmp_path, minilm_engine, sample_documents):
    ctx = _ctx(tmp_path, minilm_engine)
    documents = _sentences(sample_documents, 6)
    _, unlimited = _finished(ctx, submit_job(ctx, _spec(documents)))
    used = unlimited.usage.tokens
    assert unlimited.status is JobState.SUCCEEDED and used > 100
    # One token short of what the job runs: refused, naming the field and how it was counted
    with pytest.raises(JobRejected, match="counted exactly") as refused:
        submit_job(ctx, _spec(documents, limits={"max_tokens": used - 1}))
    assert refused.value.field == "limits.max_tokens" and f"would run {used} tokens" in str(refused.value)
    # Exactly what it runs: accepted, and it ends whole (the limit is reached, nothing is left to stop)
    _, fits = _finished(ctx, submit_job(ctx, _spec(documents, limits={"max_tokens": used})))
    assert fits.status is JobState.SUCCEEDED and fits.usage.tokens == used and fits.counts.completed == 6


def test_a_job_that_reaches_its_budget_stops_and_accounts_for_every_record_once(tmp_path, minilm_engine,
                                                                                sample_documents):
    # Steps of 128 tokens, windows of 64: a shard of four long documents takes many steps, each watched
    small_steps = PoolingEngine(minilm_engine.loaded, EngineConfig(max_num_batched_tokens=128, lookahead_tokens=4096))
    ctx = _ctx(tmp_path, small_steps, cancel_check_interval_s=1e-6, budget_estimate_margin=0.9,
               estimate_sample_per_stratum=1, webhook_allow="https://hooks.example.com")
    documents = [{"id": f"d{i:02d}", "text": d["text"][:3000]} for i, d in enumerate(sample_documents[:12])]
    options = {"long_documents": {"mode": "chunked", "window_tokens": 64}}
    _, whole = _finished(ctx, submit_job(ctx, _spec(documents, **options)))
    limit = whole.usage.tokens * 4 // 10  # stops in the middle of the second of three shards
    # The estimate of an input priced from a sample lets it through (refused only 90 % over), the run stops it
    status = submit_job(ctx, _spec(documents, limits={"max_tokens": limit}, webhook={"url": "https://hooks.example.com/e"},
                                   **options))
    job, manifest = _finished(ctx, status)
    assert manifest.status is JobState.CANCELLED and manifest.error.startswith("budget_exceeded")
    assert limit < manifest.usage.tokens <= limit + 128  # stopped within one step of passing it
    # Every record once: a row of a part, a line of the error file (budget_exceeded), or in a shard never started
    rows = [row["id"] for part in manifest.parts for row in read_embeddings(ctx.store.get(part.key)).to_pylist()]
    errors = [json.loads(line) for line in ctx.store.get(manifest.errors.key).decode().splitlines()]
    assert errors and {error["code"] for error in errors} == {"budget_exceeded"}
    unstarted = [record for shard in manifest.shards.not_started for record in _shard_records(job, shard)]
    accounted = rows + [error["id"] for error in errors] + unstarted
    assert sorted(accounted) == sorted(d["id"] for d in documents)  # none twice, none missing
    assert 0 < len(rows) < len(documents) and manifest.counts.completed == len(rows)
    assert manifest.counts.not_processed == len(errors) + len(unstarted) and manifest.counts.failed == 0
    assert manifest.errors.by_code == {"budget_exceeded": len(errors)}
    # The status says what the manifest says
    shown = current_status(job)
    assert shown.status is JobState.CANCELLED and shown.error == manifest.error
    assert shown.counts.not_processed == manifest.counts.not_processed and shown.usage.tokens == manifest.usage.tokens
    # And so does the job's end event
    event = WebhookRecords(ctx.store, job.layout).event(JOB_ENDED)
    assert event.type == "job.cancelled" and event.payload["data"]["error"] == manifest.error


def _shard_records(job: JobHandle, shard: int) -> list[str]:
    section, local = job.plan.shard_location(shard)
    shard_input = ShardInput.from_bytes(job.ctx.store.get(job.layout.shard_input(section, local)))
    return list(read_shard_records(shard_input, InputFields.of(job.spec), job.ctx.settings.storage.s3_config()))


def test_reused_tokens_are_free(tmp_path, minilm_engine, sample_documents):
    ctx = _ctx(tmp_path, minilm_engine)
    documents = _sentences(sample_documents, 4)
    _, first = _finished(ctx, submit_job(ctx, _spec(documents, reuse="tenant")))
    # Each text twice in one job: the repeats are computed once, so the first job's tokens are enough
    twice = documents + [{"id": f"again-{d['id']}", "text": d["text"]} for d in documents]
    _, repeated = _finished(ctx, submit_job(ctx, _spec(twice, limits={"max_tokens": first.usage.tokens})))
    assert repeated.status is JobState.SUCCEEDED and repeated.counts.completed == 8
    assert repeated.usage.tokens == first.usage.tokens
    # The tenant's stored outputs: a job of texts it computed before runs nothing, whatever its budget
    _, copied = _finished(ctx, submit_job(ctx, _spec(documents, reuse="tenant", limits={"max_tokens": 1})))
    assert copied.status is JobState.SUCCEEDED and copied.usage.tokens == 0
    assert copied.reuse.reused_documents == 4 and copied.reuse.reused_tokens == first.usage.tokens


def test_the_operators_per_job_limit_is_the_default_and_the_ceiling(tmp_path, minilm_engine, sample_documents):
    ctx = _ctx(tmp_path, minilm_engine, tenant_max_tokens_per_job=100_000)
    documents = _sentences(sample_documents, 2)
    job, _ = _finished(ctx, submit_job(ctx, _spec(documents)))
    assert job.spec.limits.max_tokens == 100_000  # the default, recorded in the job's spec
    with pytest.raises(JobRejected, match="at most 100000 tokens per job") as refused:
        submit_job(ctx, _spec(documents, limits={"max_tokens": 100_001}))
    assert refused.value.field == "limits.max_tokens"


def test_a_tenant_over_its_daily_tokens_is_refused_until_midnight(tmp_path, minilm_engine, sample_documents):
    ctx = _ctx(tmp_path, minilm_engine, tenant_max_tokens_per_day=50)
    documents = _sentences(sample_documents, 2)
    _, first = _finished(ctx, submit_job(ctx, _spec(documents), tenant="acme"), tenant="acme")
    assert first.usage.tokens >= 50  # counted from the job's usage, committed shard by shard
    assert ctx.day_usage.total("acme", datetime.now(timezone.utc)) == first.usage.tokens
    with pytest.raises(DailyTokensExhausted, match="daily limit is 50") as refused:
        submit_job(ctx, _spec(documents), tenant="acme")
    expected = seconds_to_day_end(datetime.now(timezone.utc))
    assert expected - 5 <= refused.value.retry_after_s <= expected
    # Another tenant's day is its own
    assert submit_job(ctx, _spec(documents), tenant="other").id

"""The estimate against the job it estimates, run in process: tokens, rows, cuts and failures
within a few percent from a sample a fraction of the input, bounded sample memory, and the data
report of the finished job counting the same things exactly."""
import json
import os
import random

import pytest

from poolq.jobs.coordination.worker_throughput import InMemoryThroughputBoard
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.submit import submit_job
from poolq.products.estimate.estimator import estimate_job
from poolq.products.estimate.stratified_sample import SampledDocument, StratifiedSample
from poolq.worker.local_runner import local_context, run_job_locally


def mixed_documents(sample_documents, count: int, seed: int = 7, most_words: float = 8) -> list[dict]:
    """Real text cut to mixed lengths (2 to 2**most_words words, log-uniform), 10 % repeated."""
    words = " ".join(d["text"] for d in sample_documents).split()
    rng = random.Random(seed)
    documents = []
    for index in range(count):
        if index % 10 == 9:
            documents.append({"id": f"r{index}", "text": documents[rng.randrange(len(documents))]["text"]})
            continue
        length = int(2 ** rng.uniform(1, most_words))
        start = rng.randrange(len(words) - length)
        documents.append({"id": f"d{index}", "text": " ".join(words[start:start + length])})
    return documents


def _write(path, documents):
    path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    return path.as_uri()


@pytest.fixture
def ctx(tmp_path, minilm_engine):
    """In process, a few large shards (the job's speed is not what is tested), a small sample."""
    context = local_context(tmp_path / "out", Settings(shard_max_documents=400, estimate_sample_per_stratum=30))
    context.engines.use("all-MiniLM-L6-v2", minilm_engine)
    return context


@pytest.mark.parametrize("long_documents", [{"mode": "naive_chunks", "chunk_tokens": 32},
                                            {"mode": "error", "window_tokens": 128}], ids=["naive_chunks", "error"])
def test_estimate_is_within_5_percent_of_the_job_and_the_report_counts_the_job(tmp_path, ctx, sample_documents,
                                                                              long_documents):
    local_ctx = ctx
    documents = mixed_documents(sample_documents, 600)
    spec = JobSpec.model_validate({"input": {"uri": _write(tmp_path / "in.jsonl", documents)},
                                   "long_documents": long_documents})
    estimate = estimate_job(local_ctx, spec, "local")
    assert estimate.sample.documents < len(documents) / 3  # an extrapolation, not a count
    manifest = JobHandle.bind(local_ctx, run_job_locally(local_ctx, spec).id).ledger.manifest()
    assert estimate.documents == len(documents) and estimate.duplicates.documents == manifest.report.documents - \
        manifest.report.distinct_documents
    computed = manifest.usage.tokens  # a repeated text is computed once (docs/reuse.md)
    every = computed + (manifest.reuse.reused_tokens if manifest.reuse else 0)
    assert abs(estimate.tokens - every) / every < 0.05, (estimate.tokens, every)
    assert abs(estimate.computed_tokens - computed) / computed < 0.05, (estimate.computed_tokens, computed)
    assert abs(estimate.rows - manifest.counts.rows) / manifest.counts.rows < 0.05
    failed = manifest.errors.by_code.get("document_too_long", 0)
    assert abs(estimate.failed.get("document_too_long", 0) - failed) <= max(10, 0.1 * failed)
    report = manifest.report
    assert report.documents == len(documents) and report.document_tokens.total == manifest.counts.completed
    assert report.failed == manifest.errors.by_code
    if long_documents["mode"] == "naive_chunks":
        assert report.chunk_tokens.total == manifest.counts.rows and report.chunked > 0
    assert report.duplicate_rate == pytest.approx(0.1, abs=0.01)


@pytest.mark.parametrize("supersede", [True, False])
def test_repeated_ids_across_objects_are_estimated_as_the_job_leaves_them_out(tmp_path, ctx, supersede):
    # Given two objects under a prefix, the older with an id repeated within it and one that the newer
    # object repeats (written oldest first, as a tenant's uploads)
    folder = tmp_path / "uploads"
    folder.mkdir()
    for name, ids, modified in (("b.jsonl", ["x", "y", "y"], 1_000_000), ("a.jsonl", ["x", "z"], 2_000_000)):
        _write(folder / name, [{"id": i, "text": f"text of {i} in {name}"} for i in ids])
        os.utime(folder / name, (modified, modified))
    spec = JobSpec.model_validate({"input": {"uri": folder.as_uri() + "/", "supersede": supersede}})
    # When it is estimated, then run
    estimate = estimate_job(ctx, spec, "local")
    manifest = JobHandle.bind(ctx, run_job_locally(ctx, spec).id).ledger.manifest()
    # Then the estimate leaves out and fails the records the job did: superseding, b's y repeat fails
    # and b's x is superseded by a's; else both repeats fail
    assert estimate.failed == manifest.errors.by_code == {"duplicate_id": 1 if supersede else 2}
    assert estimate.superseded == (manifest.counts.superseded or 0) == (1 if supersede else 0)
    assert estimate.documents == manifest.counts.total == (4 if supersede else 5)


def test_the_sample_stays_within_its_bounds_and_counts_every_document():
    sample = StratifiedSample(per_stratum=10, total_chars=160_000)
    rng = random.Random(1)
    lengths = [rng.choice([10, 100, 5_000, 60_000]) for _ in range(5000)]
    for index, length in enumerate(lengths):
        sample.add(SampledDocument("x" * length, str(index)))
    assert sum(stratum.documents for stratum in sample.strata) == 5000
    assert sum(stratum.characters for stratum in sample.strata) == sum(lengths)
    assert all(len(stratum.sample) <= size for stratum, size in zip(sample.strata, sample.sizes))
    held = sum(document.characters for stratum in sample.strata for document in stratum.sample)
    assert held <= 160_000 + 4 * 65_536  # each bucket's budget, and at least 4 documents of the longest


def test_no_time_is_made_up_without_a_measured_worker(local_ctx):
    spec = JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "one short document"}]}})
    estimate = estimate_job(local_ctx, spec, "local")
    assert (estimate.time.wall_seconds, estimate.time.worker_seconds) == (None, None)
    assert "no compute worker is alive" in estimate.time.note
    local_ctx.workers.heartbeat("w1", 60)
    local_ctx.workers.heartbeat("w2", 60)
    assert "has reported its throughput" in estimate_job(local_ctx, spec, "local").time.note
    local_ctx.throughput = InMemoryThroughputBoard()
    local_ctx.throughput.record("w1", "all-MiniLM-L6-v2", "float32", tokens=4000, seconds=2.0)
    local_ctx.throughput.record("gone", "all-MiniLM-L6-v2", "float32", tokens=9000, seconds=1.0)  # not alive
    timed = estimate_job(local_ctx, spec, "local").time
    assert [rate.worker for rate in timed.measured] == ["w1"] and timed.measured[0].tokens_per_s == 2000
    assert timed.worker_seconds == pytest.approx(estimate.computed_tokens / 2000, abs=0.1)
    assert timed.wall_seconds == pytest.approx(estimate.computed_tokens / 4000, abs=0.1)  # w2 counted at the mean


def test_past_its_time_the_pass_stops_and_scales_what_it_read_by_bytes(tmp_path, minilm_engine):
    documents = [{"id": f"d{i}", "text": f"document number {i:05d} of a uniform corpus"} for i in range(3000)]
    uri = _write(tmp_path / "in.jsonl", documents)
    context = local_context(tmp_path / "out", Settings(plan_section_bytes=8192, estimate_max_seconds=1e-6))
    estimate = estimate_job(context, JobSpec.model_validate({"input": {"uri": uri}}), "local")
    assert 0 < estimate.sample.fraction_read < 0.05  # one section of many
    assert abs(estimate.documents - 3000) / 3000 < 0.05 and abs(estimate.rows - 3000) / 3000 < 0.05


def test_a_tenant_reuse_estimate_counts_what_the_tenants_store_holds(tmp_path, ctx, sample_documents):
    documents = mixed_documents(sample_documents, 300)
    spec = JobSpec.model_validate({"input": {"uri": _write(tmp_path / "in.jsonl", documents)}, "reuse": "tenant",
                                   "long_documents": {"mode": "naive_chunks", "chunk_tokens": 32}})
    before = estimate_job(ctx, spec, "acme")
    assert (before.reuse.source, before.reuse.tokens) == ("tenant", 0)
    assert before.computed_tokens == before.tokens - before.duplicates.tokens  # repeats are computed once
    submit_job(ctx, spec, tenant="acme")  # run inline to its end: the tenant's store holds every text's output
    after = estimate_job(ctx, spec, "acme")
    assert abs(after.reuse.tokens - after.tokens) / after.tokens < 0.01 and after.computed_tokens < 0.01 * after.tokens
    other = estimate_job(ctx, spec, "globex")  # never across tenants
    assert other.reuse.tokens == 0 and other.computed_tokens == before.computed_tokens
    job_only = estimate_job(ctx, spec.model_copy(update={"reuse": "job"}), "acme")
    assert (job_only.reuse.source, job_only.reuse.tokens) == ("none", 0)


def _manifest(ctx, status):
    return JobHandle.bind(ctx, status.id).ledger.manifest()


def test_inline_documents_get_planning_record_checks_in_the_estimate(local_ctx):
    # Given inline documents, two of them with no text (planning fails them as empty_text)
    documents = [{"id": "a", "text": "a real document"}, {"id": "blank", "text": "   "}, {"id": "empty", "text": ""}]
    spec = JobSpec.model_validate({"input": {"documents": documents}})
    # When estimated, then run
    estimate = estimate_job(local_ctx, spec, "local")
    manifest = _manifest(local_ctx, run_job_locally(local_ctx, spec))
    # Then the estimate fails them by the job's code, and counts only the valid record as a document
    assert manifest.errors.by_code == {"empty_text": 2}
    assert estimate.failed == manifest.errors.by_code
    assert estimate.documents == 1


def test_inline_score_pairs_without_a_query_are_estimated_as_the_failures_they_are(local_ctx):
    # Given inline score pairs, one without a query and one with a blank one (per-record errors of a job)
    pairs = [{"id": "p", "query": "which river", "text": "the rhine flows north"},
             {"id": "no-query", "text": "a text with no query"}, {"id": "blank-query", "query": "  ", "text": "blank"}]
    spec = JobSpec.model_validate({"task": "score", "input": {"documents": pairs}})
    # When estimated, then run
    estimate = estimate_job(local_ctx, spec, "local")
    manifest = _manifest(local_ctx, run_job_locally(local_ctx, spec))
    # Then the estimate fails the same pairs by the same codes, and makes a row of the good pair only
    assert manifest.errors.by_code == {"missing_query": 1, "empty_query": 1} and manifest.counts.rows == 1
    assert estimate.failed == manifest.errors.by_code
    assert estimate.rows == manifest.counts.rows


def test_an_incremental_job_names_its_baseline_and_its_budget_is_not_refused_on_what_it_carries(local_ctx, sample_documents):
    # Given a finished run of six documents, and a run from it that adds a seventh (six carried: they run nothing)
    words = " ".join(d["text"] for d in sample_documents).split()
    documents = [{"id": f"s{i}", "text": " ".join(words[i * 30:(i + 1) * 30])} for i in range(7)]
    first = submit_job(local_ctx, JobSpec.model_validate({"input": {"documents": documents[:6]}}))
    body = {"input": {"documents": documents}, "incremental_from": first.id}
    # When it is estimated: the estimate names the run it carries from (it reads no baseline: an upper bound)
    estimate = estimate_job(local_ctx, JobSpec.model_validate(body), "local")
    assert estimate.carries_from == first.id and estimate.documents == 7
    fresh = estimate_job(local_ctx, JobSpec.model_validate({"input": {"documents": documents}}), "local")
    assert fresh.carries_from is None
    # Then a budget of what the run uses lets it run whole (it was refused on the estimate's count)
    used = _manifest(local_ctx, submit_job(local_ctx, JobSpec.model_validate(body))).usage.tokens
    assert used < estimate.computed_tokens
    again = _manifest(local_ctx, submit_job(local_ctx, JobSpec.model_validate({**body, "limits": {"max_tokens": used}})))
    assert again.status is JobState.SUCCEEDED and again.usage.tokens == used and again.counts.carried == 6

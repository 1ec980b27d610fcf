"""The sink rows' ``vector_origin`` counts what changes the rows and nothing else: a webhook (or the
reuse choice) rewrites no stored row, in the in-process sink and a LanceDB dataset on disk, and an
incremental reindex after a webhook job writes only the changed documents. Origins of jobs without
a webhook are what they were, so rows loaded before keep theirs."""
import json
import re

import pytest
from support.engine_doubles import CountingEngine

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.products.sinks.sink_rows import vector_origin
from poolq.worker.local_runner import local_context, run_job_locally

MODEL = "all-MiniLM-L6-v2"
ENGINES = ["sha256:abc/float32"]
HOOK = {"url": "https://hooks.example.com/jobs"}


def _origin(**options) -> str:
    spec = JobSpec.model_validate({"input": {"documents": [{"id": "a", "text": "x"}]}, **options})
    return vector_origin(JobManifest.model_construct(model=spec.model, engines=ENGINES,
                                                     options=spec.model_dump(mode="json", exclude={"input"})))


@pytest.mark.parametrize(("options", "origin"), [
    ({}, "f4642a0f149625a57ebe92b1d416d506"),
    ({"model": "bge-small-en-v1.5", "task": ["embed", "sparse_embed"], "output": {"dimensions": 64, "include_fields": ["t"]},
      "long_documents": {"mode": "late_chunks", "chunk_tokens": 64}, "sink": "search", "incremental_from": "0" * 32,
      "compute_dtype": "float16", "allow_mixed_engines": True}, "d05c037376afd414ec45bd13d9b30d3e"),
    ({"prompt_name": "query"}, "3b69aa9e835c28a8da189ffd90cdb753"),
    ({"prompt": "query: ", "output": {"dtype": "int8", "int8_range": [-2, 2]}, "score_mode": "cosine"},
     "baae3bc2f062d699d1cf03aead90fa32"),
])
def test_a_webhook_changes_no_origin_and_origins_without_one_are_what_they_were(options, origin):
    """Digests made by the code before webhooks were declared neutral (the rows loaded then keep them)."""
    assert _origin(**options) == origin
    assert _origin(**options, webhook=HOOK) == _origin(**options, reuse="tenant") == origin


@pytest.mark.parametrize("options", [{"output": {"include_fields": ["title"]}}, {"output": {"dtype": "float16"}},
                                     {"prompt": "query: "}, {"long_documents": {"mode": "truncate"}}])
def test_what_changes_the_rows_changes_the_origin(options):
    assert _origin(**options) != _origin()


@pytest.fixture(scope="module")
def sentences(sample_documents):
    found = [s.strip() for d in sample_documents for s in re.split(r"(?<=[.!?])\s+", d["text"])]
    return [s for s in found if 40 <= len(s) <= 300]


@pytest.fixture(params=["memory", "lancedb"])
def ctx(request, tmp_path, minilm_engine):
    url = {"memory": f"memory://{tmp_path.name}", "lancedb": f"lancedb://{tmp_path}/lance"}[request.param]
    settings = Settings(shard_max_documents=10, sinks={"search": {"url": url, "table": "docs"}},
                        sink_grants={"local": ["search"]}, webhook_allow="https://hooks.example.com")
    context = local_context(tmp_path / "out", settings)
    context.engines.use(MODEL, CountingEngine(minilm_engine))
    return context


def _load(ctx, tmp_path, docs, **options):
    path = tmp_path / f"in-{len(list(tmp_path.glob('in-*')))}.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    spec = JobSpec.model_validate({"model": MODEL, "input": {"uri": path.as_uri()}, "sink": "search", **options})
    status = run_job_locally(ctx, spec)
    assert status.status is JobState.SUCCEEDED, status.error
    manifest = JobHandle.bind(ctx, status.id).ledger.manifest()
    [load] = manifest.sinks
    assert load.state == "succeeded", load.error
    return status.id, manifest, (load.upserted, load.deleted, load.unchanged)


def test_toggling_a_webhook_rewrites_no_stored_row(ctx, tmp_path, sentences):
    docs = [{"id": f"d{i:02d}", "text": t} for i, t in enumerate(sentences[:20])]
    assert _load(ctx, tmp_path, docs)[2] == (20, 0, 0)
    assert _load(ctx, tmp_path, docs, webhook=HOOK)[2] == (0, 0, 20)  # on: nothing rewritten
    assert _load(ctx, tmp_path, docs)[2] == (0, 0, 20)  # and off again


def test_an_incremental_reindex_after_a_webhook_job_writes_only_the_changed_documents(ctx, tmp_path, sentences):
    docs = [{"id": f"d{i:02d}", "text": t} for i, t in enumerate(sentences[:20])]
    hooked, _, loaded = _load(ctx, tmp_path, docs, webhook=HOOK)
    assert loaded == (20, 0, 0)
    edited = [{**d, "text": d["text"] + " (revised)"} if i % 4 == 0 else d for i, d in enumerate(docs)]
    _, manifest, synced = _load(ctx, tmp_path, edited, incremental_from=hooked)
    assert manifest.counts.carried == 15 and synced == (5, 0, 15)

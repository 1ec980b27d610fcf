"""An incremental rerun of 100,000 documents where 3 changed embeds exactly those 3, and its
planning holds one id partition at a time, not the corpus."""
import json
import tracemalloc

import pytest
from support.engine_doubles import ConstantVectorEngine

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps import planner as planner_module
from poolq.worker.local_runner import local_context, run_job_locally

DOCUMENTS = 100_000
CHANGED = (17, 50_000, 99_998)


def _write(path, edited=()):
    with path.open("w") as handle:
        for i in range(DOCUMENTS):
            text = f"document {i} of the corpus" + (" (revised)" if i in edited else "")
            handle.write(json.dumps({"id": f"doc-{i:06d}", "text": text}) + "\n")
    return path.as_uri()


@pytest.mark.slow
def test_three_changed_documents_of_100k_are_the_only_ones_embedded_again(tmp_path, minilm_engine, monkeypatch):
    # Parts of 5,000 documents (20 of them): what planning may hold at a time is one part
    ctx = local_context(tmp_path / "out", Settings(plan_partition_bytes=1 << 20, shard_max_documents=5000))
    engine = ConstantVectorEngine(minilm_engine)
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    folder = tmp_path / "corpus"
    folder.mkdir()
    first = run_job_locally(JobSpec.model_validate({"input": {"uri": _write(folder / "part.jsonl")}}), ctx)
    assert first.status is JobState.SUCCEEDED and len(engine.keys) == DOCUMENTS
    # When 3 documents change and the job runs again from the first
    engine.keys.clear()
    uri = _write(folder / "part.jsonl", edited=CHANGED)
    peaks = []
    plan_job = planner_module.plan_job

    def measured(job):
        tracemalloc.start()
        try:
            return plan_job(job)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr("poolq.worker.local_runner.plan_job", measured)
    second = run_job_locally(JobSpec.model_validate({"input": {"uri": uri}, "incremental_from": first.id}), ctx)
    # Then exactly the 3 were embedded, the rest carried, and every document is in the output once
    assert second.status is JobState.SUCCEEDED
    assert sorted(engine.keys) == [f"doc-{i:06d}" for i in CHANGED]
    manifest = JobHandle.bind(ctx, second.id).ledger.manifest()
    assert (manifest.counts.completed, manifest.counts.carried) == (DOCUMENTS, DOCUMENTS - 3)
    assert sum(part.rows for part in manifest.parts) == DOCUMENTS
    # And planning's Python allocations (every stage: the input is one section) stayed within its
    # fixed buffers (the scan's 1 MiB upload chunk, two 1 MiB spill buffers, one id partition of
    # ~1 MiB of input, one range of decisions and the section's skip arrays), while the corpus's
    # ids and content hashes alone, held in one dict, take over 20 MB
    held = {f"doc-{i:06d}": "0" * 64 for i in range(DOCUMENTS)}
    assert peaks and peaks[0] < 10 << 20 < _python_bytes(held), f"planning peaked at {peaks[0] / 2**20:.1f} MiB"


def _python_bytes(ids_and_hashes: dict) -> int:
    import sys

    return sys.getsizeof(ids_and_hashes) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in ids_and_hashes.items())

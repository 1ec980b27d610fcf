"""An incremental rerun of 50,000 documents where 3 changed embeds exactly those 3, and its
planning holds one id partition at a time, not the corpus.

What planning may hold is sized by settings and fixed buffers, not by the corpus: the corpus is
scaled down with its id partitions (256 KiB of input, 8 of them) and its baseline's parts (2,500
documents, 20 of them), so it still spans several partitions and 20 parts, and the ids and hashes
of its 50,000 documents still take more than the bound that planning's allocations keep under."""
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

DOCUMENTS = 50_000
CHANGED = (17, 25_000, 49_998)


def _write(path, edited=()):
    with path.open("w") as handle:
        for i in range(DOCUMENTS):
            text = f"document {i} of the corpus" + (" (revised)" if i in edited else "")
            handle.write(json.dumps({"id": f"doc-{i:06d}", "text": text}) + "\n")
    return path.as_uri()


@pytest.mark.slow
def test_three_changed_documents_of_50k_are_the_only_ones_embedded_again(tmp_path, minilm_engine, monkeypatch):
    # Parts of 2,500 documents (20 of them), id partitions of 256 KiB of input (8): what planning may
    # hold at a time is one partition and one part
    ctx = local_context(tmp_path / "out", Settings(plan_partition_bytes=256 << 10, shard_max_documents=2500))
    engine = ConstantVectorEngine(minilm_engine)
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    folder = tmp_path / "corpus"
    folder.mkdir()
    first = run_job_locally(ctx, JobSpec.model_validate({"input": {"uri": _write(folder / "part.jsonl")}}))
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
    second = run_job_locally(ctx, JobSpec.model_validate({"input": {"uri": uri}, "incremental_from": first.id}))
    # Then exactly the 3 were embedded, the rest carried, and every document is in the output once
    assert second.status is JobState.SUCCEEDED
    assert sorted(engine.keys) == [f"doc-{i:06d}" for i in CHANGED]
    manifest = JobHandle.bind(ctx, second.id).ledger.manifest()
    assert (manifest.counts.completed, manifest.counts.carried) == (DOCUMENTS, DOCUMENTS - 3)
    assert sum(part.rows for part in manifest.parts) == DOCUMENTS
    # And planning's Python allocations (every stage: the input is one section) stayed within its
    # fixed buffers (the scan's 1 MiB upload chunk, two 1 MiB spill buffers, one id partition of
    # ~256 KiB of input, one range of decisions and the section's skip arrays), while the corpus's
    # ids and content hashes alone, held in one dict, take 10 MiB (on top of those buffers)
    held = {f"doc-{i:06d}": "0" * 64 for i in range(DOCUMENTS)}
    assert peaks and peaks[0] < 8 << 20 < _python_bytes(held), f"planning peaked at {peaks[0] / 2**20:.1f} MiB"


def _python_bytes(ids_and_hashes: dict) -> int:
    import sys

    return sys.getsizeof(ids_and_hashes) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in ids_and_hashes.items())

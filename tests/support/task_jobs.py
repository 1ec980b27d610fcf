"""Running a job of any task in process and reading back its manifest and rows."""
import json

import pyarrow as pa

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.storage import read_part
from poolq.worker.local_runner import run_job_locally


def run_task_job(ctx, documents, **fields):
    """Run a job of ``documents`` with ``fields`` (task, model, output, long_documents); its
    manifest and all its rows, sorted by id (and chunk)."""
    spec = JobSpec.model_validate({"input": {"documents": documents}, **fields})
    status = run_job_locally(ctx, spec)
    assert status.status is JobState.SUCCEEDED, (status.error, status.error_samples)
    manifest = json.loads(ctx.store.get(JobHandle.bind(ctx, status.id).layout.manifest))
    table = pa.concat_tables([read_part(ctx.store.get(part["key"])) for part in manifest["parts"]])
    keys = [("id", "ascending")] + ([("chunk_index", "ascending")] if "chunk_index" in table.column_names else [])
    return manifest, table.sort_by(keys)

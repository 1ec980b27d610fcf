"""The ledger's promise where a job does not run cleanly to its end: every
input record ends in exactly one listed part or in the job's error file (or, for a job that stopped,
is counted as not processed), and the manifest's counts balance: total == completed + failed +
not_processed.

Each test runs the in-process runner's own steps (``local_context``: a step that raises is given up
with ``fail_shard`` / ``fail_job``, as ``_run_bound`` does) and checks the outcome from the outside.
"""
import json

from support.job_doubles import RecordingEnqueuer

from poolq.jobs.coordination.enqueuer import FINALIZE_TASK, PLAN_SECTION_TASK, PLAN_TASK, SHARD_TASK
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.steps.cancel import cancel_job
from poolq.jobs.steps.submit import submit_job
from poolq.storage import read_embeddings

MODEL = "all-MiniLM-L6-v2"
_HANDLERS = {"plan": PLAN_TASK, "plan_section": PLAN_SECTION_TASK, "shard": SHARD_TASK, "finalize": FINALIZE_TASK}


def _held(ctx):
    """Steps are recorded, not run, until ``_run_held``; they then run as the in-process runner runs them."""
    inline = ctx.enqueuer
    ctx.enqueuer = RecordingEnqueuer()
    return inline


def _run_held(ctx, inline, kinds=frozenset(_HANDLERS)) -> None:
    """Run the recorded steps of ``kinds`` (and those they record) in order, with the in-process runner's handlers."""
    while runnable := [task for task in ctx.enqueuer.tasks if task[0] in kinds]:
        ctx.enqueuer.tasks.remove(runnable[0])
        kind, *args = runnable[0]
        inline.handlers[_HANDLERS[kind]](*args)


def _accounted(ctx, job_id):
    """The manifest, the ids in its parts and the ids in its error file."""
    job = JobHandle.bind(ctx, job_id)
    manifest = job.ledger.manifest()
    assert manifest is not None, f"job {job_id} has no manifest (status {ctx.status.get(job_id).status.value})"
    ids = [i for part in manifest.parts for i in read_embeddings(ctx.store.get(part.key)).column("id").to_pylist()]
    errors = [json.loads(line)["id"] for line in ctx.store.get(manifest.errors.key).decode().splitlines() if line.strip()]
    return manifest, ids, errors


def _balanced(manifest) -> bool:
    counts = manifest.counts
    return counts.total == counts.completed + counts.failed + counts.not_processed


def _docs(n: int) -> list[dict]:
    return [{"id": f"doc-{i}", "text": f"document number {i} about ledgers"} for i in range(n)]


def test_an_input_replaced_after_planning_still_ends_the_job(tmp_path, local_ctx):
    """A shard that cannot read its records back (InputChanged, non-retryable) is given up by abandon_shard,
    which reads them back again to name them and fails the same way: fail_shard then only marks the status
    failed. No commit, no manifest; the job stays active and the reconciler re-sends its shards every pass."""
    path = tmp_path / "in.jsonl"
    docs = _docs(6)  # shards of 4 and 2
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    inline = _held(local_ctx)
    job_id = submit_job(local_ctx, JobSpec.model_validate({"input": {"uri": f"file://{path}"}})).id
    _run_held(local_ctx, inline, kinds=frozenset({"plan", "plan_section"}))
    assert JobHandle.bind(local_ctx, job_id).ledger.plan().num_shards == 2
    # When the input object is replaced after planning (its shards cannot read their records back)
    path.write_text("".join(json.dumps({**d, "text": "changed"}) + "\n" for d in docs) + "{}\n")
    _run_held(local_ctx, inline)
    # Then the job still ends, with a manifest whose counts balance
    manifest, ids, errors = _accounted(local_ctx, job_id)
    assert manifest.status is JobState.FAILED and "InputChanged" in manifest.error and "shard 0" in manifest.error
    assert _balanced(manifest), manifest.counts
    # its records in no part and no error line: not processed, in the shards it names as never committed
    assert (ids, errors, manifest.counts.not_processed, manifest.shards.not_started) == ([], [], 6, [0, 1])


class _CancelThenFail:
    """The real engine, except that its first run asks the job's cancel and then fails (not retryable)."""

    def __init__(self, inner, ctx) -> None:
        self.inner, self.ctx, self.job_id, self.runs = inner, ctx, None, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, requests, policy=None, **options):
        self.runs += 1
        if self.runs == 1:
            cancel_job(JobHandle.bind(self.ctx, self.job_id))
            raise RuntimeError("the model's runner broke")
        return self.inner.run(requests, policy, **options)


def test_a_cancelled_job_whose_last_running_shard_fails_is_still_finalized(local_ctx, minilm_engine):
    """The cancel saw the shard's lease and left the finalizer to it; the shard failed, abandon_shard committed
    it as failed but sends no finalizer (run_shard's tail does, abandon_shard's does not), and the next shard
    task only frees its slot. In process the job stays cancelling for ever; a deployment waits for the reconciler."""
    engine = _CancelThenFail(minilm_engine, local_ctx)
    local_ctx.engines.use(MODEL, engine)
    inline = _held(local_ctx)
    engine.job_id = submit_job(local_ctx, JobSpec.model_validate({"input": {"documents": _docs(6)}})).id
    # When shard 0 runs, the job is cancelled, and the shard then fails for good (given up by fail_shard)
    _run_held(local_ctx, inline)
    # Then the job ends cancelled: shard 0's records are errors, shard 1's not processed
    manifest, ids, errors = _accounted(local_ctx, engine.job_id)
    assert manifest.status is JobState.CANCELLED
    assert ids == [] and sorted(errors) == [f"doc-{i}" for i in range(4)]
    assert (manifest.counts.failed, manifest.counts.not_processed) == (4, 2) and _balanced(manifest)

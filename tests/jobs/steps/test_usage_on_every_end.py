"""``usage.tokens`` is what the model ran for the job, whatever way it ends: a cancel that stops a
shard in the middle of a long document bills the windows it ran, and the number never drops below
what the running job's status showed (``usage.tokens`` + ``in_progress.tokens``)."""
from support.job_doubles import RecordingEnqueuer, drain

from poolq.engine import EngineConfig, PoolingEngine
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.status.current_status import status_from_ledger
from poolq.jobs.steps.cancel import cancel_job
from poolq.jobs.steps.submit import submit_job

MODEL = "all-MiniLM-L6-v2"


class CancellingEngine:
    """The real engine, adding up the tokens of every step it runs; at step ``cancel_at`` it asks the
    job's cancel (before the shard's own watch sees the step) and notes what the status showed then."""

    def __init__(self, inner: PoolingEngine, ctx, cancel_at: int) -> None:
        self.inner, self.ctx, self.cancel_at = inner, ctx, cancel_at
        self.job_id: str | None = None
        self.steps = self.tokens = 0
        self.shown_before_cancel: int | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, requests, policy=None, *, on_step=None, **options):
        def watched(step) -> None:
            self.steps += 1
            self.tokens += step.tokens
            if self.steps == self.cancel_at:
                shown = self.ctx.status.get(self.job_id)
                self.shown_before_cancel = shown.usage.tokens + shown.in_progress.tokens
                cancel_job(JobHandle.bind(self.ctx, self.job_id))
            if on_step is not None:
                on_step(step)

        return self.inner.run(requests, policy, on_step=watched, **options)


def test_a_cancel_in_the_middle_of_a_long_document_bills_the_windows_it_ran(local_ctx, minilm_engine, long_documents):
    # Given a shard whose first document is long (many windows of 64 tokens, two a step), then short ones
    # that finish early but wait for it (results come out in input order), progress reported at every step
    local_ctx.settings = local_ctx.settings.with_values(cancel_check_interval_s=1e-6,
                                                                progress_interval_s=1e-6)
    local_ctx.enqueuer = RecordingEnqueuer()
    small_steps = PoolingEngine(minilm_engine.loaded, EngineConfig(max_num_batched_tokens=128, lookahead_tokens=4096))
    engine = CancellingEngine(small_steps, local_ctx, cancel_at=6)
    local_ctx.engines.use(MODEL, engine)
    documents = [{"id": "long", "text": long_documents[0]["text"]},
                 *({"id": f"short-{i}", "text": f"a short document, number {i}"} for i in range(3))]
    spec = JobSpec.model_validate({"model": MODEL, "input": {"documents": documents},
                                   "long_documents": {"mode": "chunked", "window_tokens": 64}})
    engine.job_id = submit_job(local_ctx, spec).id
    # When the job is cancelled at the shard's sixth step, long before the long document is done
    drain(local_ctx)
    # Then the shard committed no row (nothing reached its turn), and yet the tokens it ran are billed
    ledger = JobHandle.bind(local_ctx, engine.job_id).ledger
    manifest = ledger.manifest()
    assert manifest.status is JobState.CANCELLED and manifest.counts.completed == 0
    assert manifest.counts.not_processed == 4
    assert engine.steps == 6 and engine.tokens > 500  # the model really ran them
    assert manifest.usage.tokens == engine.tokens
    # And every view says the same, none less than the running job showed before the cancel
    assert 0 < engine.shown_before_cancel <= manifest.usage.tokens
    assert local_ctx.status.get(engine.job_id).usage.tokens == manifest.usage.tokens
    assert ledger.shard_commit(0).tokens == manifest.usage.tokens
    assert status_from_ledger(JobHandle.bind(local_ctx, engine.job_id)).usage.tokens == manifest.usage.tokens

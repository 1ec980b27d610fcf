"""Progress moves while a shard runs: a real worker reports what it has done between commits."""
import pytest

from poolq.jobs import JobHandle

pytestmark = pytest.mark.integration


@pytest.mark.settings(shard_max_documents=12, progress_interval_s=0.05, max_num_batched_tokens=512,
                      task_soft_time_limit_s=30, task_time_limit_s=35, visibility_timeout_s=80)
def test_a_running_shard_reports_its_documents_and_tokens_between_commits(deployment, documents):
    # Given a worker taking ~0.2 s per document, steps of about two documents (512 tokens; the
    # documents are truncated to 256) and a job of one shard of 12 documents
    deployment.start_worker("w1", slow_s=0.2)
    job_id = deployment.submit(documents)
    seen: set[tuple[int, int]] = set()

    def finished():
        status = deployment.ctx.status.get(job_id)
        if status is not None and status.in_progress.documents:
            seen.add((status.in_progress.documents, status.in_progress.tokens))
        return status is not None and status.status.is_terminal

    # When it runs to the end, its status polled meanwhile
    deployment.wait(finished, 120, f"job {job_id} to finish", interval=0.02)
    # Then the one shard's progress was seen at three or more points, moving forward, and is gone
    # once it committed (the counts took it over)
    assert JobHandle.bind(deployment.ctx, job_id).ledger.plan().num_shards == 1
    assert len(seen) >= 3, seen
    points = sorted(seen)
    assert all(later[1] > earlier[1] for earlier, later in zip(points, points[1:]))  # tokens grow with documents
    final = deployment.ctx.status.get(job_id)
    assert final.in_progress.documents == 0 and final.counts.completed == len(documents)

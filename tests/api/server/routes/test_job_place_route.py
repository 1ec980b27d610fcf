"""``GET /v1/jobs/{id}`` carries a waiting job's place (``queue``), and a finished job none."""
from dataclasses import replace

from support.api_client import authed_client

from poolq.jobs.coordination.enqueuer import Enqueuer
from poolq.jobs.coordination.leases import InMemoryLeaseStore
from poolq.jobs.coordination.memory_status_store import InMemoryJobStatusStore
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_status import JobStatus
from poolq.worker.local_runner import local_context


class _HoldingEnqueuer(Enqueuer):
    """Accepts work and never runs it: jobs stay queued."""

    def plan(self, job_id): ...
    def plan_section(self, job_id, stage, section): ...
    def run_shard(self, job_id, shard): ...
    def finalize(self, job_id): ...


def test_queued_jobs_show_their_place_and_the_list_leaves_it_out(tmp_path):
    settings = Settings(store="local", local_store_root=tmp_path)
    ctx = replace(local_context(tmp_path), settings=settings, status=InMemoryJobStatusStore(),
                  leases=InMemoryLeaseStore(), enqueuer=_HoldingEnqueuer())
    client = authed_client(ctx, settings)
    body = {"input": {"documents": [{"id": "a", "text": "x"}]}}
    first, second = (client.post("/v1/jobs", json=body).json()["id"] for _ in range(2))
    polled = [JobStatus.model_validate(client.get(f"/v1/jobs/{job}").json()) for job in (first, second)]
    assert [job.queue.jobs_ahead for job in polled] == [0, 1]
    assert {(job.queue.tenant_share, job.queue.eta_s) for job in polled} == {(1.0, None)}  # not planned: no ETA
    assert all(job["queue"] is None for job in client.get("/v1/jobs").json()["jobs"])

"""A small Python client for poolq's HTTP API."""
from __future__ import annotations

import io
import time
from typing import Any, Callable

import httpx

TERMINAL_STATES = {"succeeded", "partially_succeeded", "failed", "cancelled"}


class PoolqError(RuntimeError):
    """The server refused a request; ``status_code`` and ``detail`` say why."""

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


class PoolqClient:
    """Submit jobs, poll them, fetch their results."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, transport=transport, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "PoolqClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise PoolqError(response.status_code, detail)
        if response.status_code == 204:
            return {}
        return response.json()

    def submit(self, spec: dict, *, idempotency_key: str | None = None) -> dict:
        """``POST /v1/jobs``; returns the queued job. The same ``idempotency_key`` returns the same job."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._call("POST", "/v1/jobs", json=spec, headers=headers)

    def cancel(self, job_id: str) -> dict:
        """``POST /v1/jobs/{id}/cancel``: stop the job; committed parts stay in its manifest."""
        return self._call("POST", f"/v1/jobs/{job_id}/cancel")

    def get(self, job_id: str) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def wait(
        self,
        job_id: str,
        *,
        poll_interval: float = 1.0,
        timeout: float | None = None,
        on_progress: Callable[[dict], None] | None = None,
    ) -> dict:
        """Poll until the job reaches a terminal state; ``on_progress`` sees every poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if on_progress:
                on_progress(job)
            if job["status"] in TERMINAL_STATES:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s")
            time.sleep(poll_interval)

    def results(self, job_id: str) -> dict:
        """The manifest of a finished job, with presigned part URLs."""
        return self._call("GET", f"/v1/jobs/{job_id}/results")

    def create_schedule(self, schedule: dict) -> dict:
        """``POST /v1/schedules``: ``{"cron": "0 3 * * *", "input": {"uri": "s3://b/docs/"}, "template": {...}}``."""
        return self._call("POST", "/v1/schedules", json=schedule)

    def list_schedules(self) -> list[dict]:
        return self._call("GET", "/v1/schedules")["schedules"]

    def get_schedule(self, schedule_id: str) -> dict:
        """The schedule with its recent runs (slot, job_id, status), newest first."""
        return self._call("GET", f"/v1/schedules/{schedule_id}")

    def delete_schedule(self, schedule_id: str) -> None:
        """``DELETE /v1/schedules/{id}``: the jobs it ran stay."""
        self._call("DELETE", f"/v1/schedules/{schedule_id}")

    def run_schedule(self, schedule_id: str) -> dict:
        """``POST /v1/schedules/{id}/run``: run it now (incrementally); returns the run (its ``job_id``)."""
        return self._call("POST", f"/v1/schedules/{schedule_id}/run")

    def read_table(self, job_id: str):
        """All result parts of a finished job, downloaded and concatenated as one pyarrow Table."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        manifest = self.results(job_id)
        tables = []
        for part in manifest["parts"]:
            response = httpx.get(part["url"], timeout=60)
            response.raise_for_status()
            tables.append(pq.read_table(io.BytesIO(response.content)))
        return pa.concat_tables(tables) if tables else None

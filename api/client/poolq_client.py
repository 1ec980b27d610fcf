"""A small Python client for poolq's HTTP API.

``PoolqClient(base_url, api_key)`` sends ``Authorization: Bearer <api_key>`` on every call; with
no ``api_key`` it uses the ``POOLQ_API_KEY`` environment variable (if set), with no ``base_url``
``POOLQ_API_URL``, else ``http://127.0.0.1:8000`` (``poolq dev up``'s API). A refused request
raises :class:`PoolqError` (``status_code``, ``detail``, ``retry_after`` for 429/503); a server
that cannot be reached raises :class:`PoolqConnectionError`. Nothing is retried, except
:meth:`PoolqClient.wait`'s polling (a bounded number of 429/503 answers, see there).

Every answer is the server's own response model (``JobStatus``, ``JobResults``, ``Schedule``, ...:
the classes its routes declare, imported, not copied), read by attribute: ``job.usage.tokens``.
Reading one as the JSON dict it used to be (``job["usage"]["tokens"]``) still works for one
release, with a DeprecationWarning (poolq.jobs.spec.dict_access).
"""
from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from poolq.api.client.result_files import decode_vectors, fetch_bytes, local_part_path, save_url, with_local_paths
from poolq.api.client.upload_format import upload_format
from poolq.api.server.schemas import JobList, JobResults, SpecValidation
from poolq.jobs.spec.job_status import JobStatus
from poolq.jobs.spec.served_model import ModelList
from poolq.products.estimate.job_estimate import JobEstimate

if TYPE_CHECKING:  # loaded by the methods that answer with them: they import the schedule and upload routes' modules
    from poolq.api.server.routes.schedules import ScheduleDetail
    from poolq.api.server.routes.sinks import SinkRetry
    from poolq.api.server.routes.uploads import Upload
    from poolq.products import RunView, Schedule

Answer = TypeVar("Answer", bound=BaseModel)
API_KEY_ENV = "POOLQ_API_KEY"
API_URL_ENV = "POOLQ_API_URL"
DEFAULT_API_URL = "http://127.0.0.1:8000"
RETRYABLE_POLL_STATUSES = {429, 503}
MAX_RETRY_WAIT_S = 60.0


class PoolqError(RuntimeError):
    """The server refused a request; ``status_code`` and ``detail`` say why. ``retry_after``: the
    seconds its ``Retry-After`` header asked for (429, 503), else None."""

    def __init__(self, status_code: int, detail: Any, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after


class PoolqConnectionError(ConnectionError):
    """The API could not be reached (refused, DNS, timeout, dropped connection)."""


class PoolqProtocolError(RuntimeError):
    """The server answered, but not as the poolq API does (a wrong URL, a proxy's page): its body is
    not the JSON the route declares."""


class PoolqClient:
    """Submit jobs, poll them, fetch their results; manage schedules."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        base_url = base_url or os.environ.get(API_URL_ENV) or DEFAULT_API_URL
        api_key = api_key or os.environ.get(API_KEY_ENV) or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport, headers=headers)
        self._files = httpx.Client(timeout=max(timeout, 60.0), follow_redirects=True)  # presigned URLs: no API key

    def close(self) -> None:
        self._http.close()
        self._files.close()

    def __enter__(self) -> "PoolqClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, model: type[Answer], method: str, path: str, **kwargs: Any) -> Answer:
        """The request's answer, read as the response model its route declares. Fields the model does not
        know are ignored (a newer server may add some: this client keeps working); one it needs, missing
        or mistyped, is a protocol error."""
        body = self._call(method, path, **kwargs)
        try:
            return model.model_validate(body, extra="ignore")
        except ValidationError as exc:
            raise PoolqProtocolError(f"{method} {self.base_url}{path} answered something that is not a poolq "
                                     f"{model.__name__} ({exc.error_count()} fields off; is --api-url poolq's?)") from None

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise PoolqConnectionError(f"cannot reach the poolq API at {self.base_url}: {exc or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise _error_from(response)
        if response.status_code == 204:
            return {}
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content type")
            raise PoolqProtocolError(f"{method} {self.base_url}{path} answered HTTP {response.status_code} with "
                                     f"{kind}, not the poolq API's JSON (is --api-url poolq's?)") from None

    # -- jobs --------------------------------------------------------------------------------
    def submit(self, spec: dict, *, idempotency_key: str | None = None) -> JobStatus:
        """``POST /v1/jobs``; returns the queued job. The same ``idempotency_key`` returns the same job."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._answer(JobStatus, "POST", "/v1/jobs", json=spec, headers=headers)

    def validate(self, spec: dict) -> SpecValidation:
        """``POST /v1/jobs/validate``: the submission's checks, nothing submitted (422 names what is wrong)."""
        return self._answer(SpecValidation, "POST", "/v1/jobs/validate", json=spec)

    def estimate(self, spec: dict, *, timeout: float = 300.0) -> JobEstimate:
        """``POST /v1/jobs/estimate``: what the job would cost (tokens, rows, cuts, duplicates, time on
        the live workers); nothing is submitted. Refused like ``submit``. ``timeout``: the server reads
        the whole input (up to its ``estimate_max_seconds``), so it waits longer than other calls."""
        return self._answer(JobEstimate, "POST", "/v1/jobs/estimate", json=spec, timeout=timeout)

    def models(self) -> ModelList:
        """``GET /v1/models``: what this deployment serves (tasks, dimensions, window, prompts, loaded)."""
        return self._answer(ModelList, "GET", "/v1/models")

    def upload(self, source: str | os.PathLike | bytes, *, format: str | None = None) -> str:
        """Upload an input file (a path, or its bytes: JSONL, ``.jsonl.gz`` or Parquet) through a
        presigned PUT (``POST /v1/uploads``); returns the ``s3://`` URI to submit as
        ``{"input": {"uri": ...}}``, whose ending keeps the format. ``format`` (``jsonl``,
        ``jsonl.gz``, ``parquet``): None decides it by the first bytes, then by the file's name.
        ValueError, before anything is sent, if the name says Parquet and the bytes are not.
        501 on a local-store server."""
        data, name = _file_bytes(source)
        ticket = self.new_upload(format or upload_format(data, name))
        self.put_upload(ticket, data)
        return ticket.uri

    def new_upload(self, format: str = "jsonl") -> Upload:
        """``POST /v1/uploads``: a ticket (``uri``, ``url``, ``method``) for one file; nothing is stored yet."""
        from poolq.api.server.routes.uploads import Upload

        return self._answer(Upload, "POST", "/v1/uploads", json={"format": format})

    def put_upload(self, ticket: Upload | dict, data: bytes) -> None:
        """Send the file's bytes to a ticket's presigned URL (``ticket``: what :meth:`new_upload` returned;
        its JSON dict is still taken for one release)."""
        from poolq.api.server.routes.uploads import Upload

        ticket = Upload.model_validate(ticket)
        try:
            response = self._files.request(ticket.method, ticket.url, content=data)
        except httpx.TransportError as exc:
            raise PoolqConnectionError(f"cannot reach the upload URL's store: {exc or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise PoolqError(response.status_code, f"the store refused the upload: {response.text[:300]}")

    def get(self, job_id: str) -> JobStatus:
        """``GET /v1/jobs/{id}``: status, counts, usage, timestamps, result, error."""
        return self._answer(JobStatus, "GET", f"/v1/jobs/{job_id}")

    def jobs(self, limit: int = 50, before: str | None = None) -> JobList:
        """``GET /v1/jobs``: ``jobs`` (each a JobStatus), newest first, and ``next_before``: pass it
        as ``before`` for the next (older) page."""
        params: dict[str, Any] = {"limit": limit}
        if before:
            params["before"] = before
        return self._answer(JobList, "GET", "/v1/jobs", params=params)

    def retry_sinks(self, job_id: str) -> SinkRetry:
        """``POST /v1/jobs/{id}/sinks/retry``: load the finished job's rows into its failed sink again."""
        from poolq.api.server.routes.sinks import SinkRetry

        return self._answer(SinkRetry, "POST", f"/v1/jobs/{job_id}/sinks/retry")

    def cancel(self, job_id: str) -> JobStatus:
        """``POST /v1/jobs/{id}/cancel``: stop the job; committed parts stay in its manifest."""
        return self._answer(JobStatus, "POST", f"/v1/jobs/{job_id}/cancel")

    def wait(
        self,
        job_id: str,
        *,
        poll_interval: float = 1.0,
        timeout: float | None = None,
        on_progress: Callable[[JobStatus], None] | None = None,
        max_retries: int = 5,
    ) -> JobStatus:
        """Poll until the job reaches a terminal state; ``on_progress`` sees every poll.

        A poll answered 429 or 503 is retried after its ``Retry-After`` (else ``poll_interval``;
        at most 60 s), at most ``max_retries`` times in a row; then the PoolqError is raised. TimeoutError after
        ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            try:
                job = self.get(job_id)
                failures = 0
            except PoolqError as exc:
                failures += 1
                if exc.status_code not in RETRYABLE_POLL_STATUSES or failures > max_retries:
                    raise
                _check_deadline(deadline, job_id, "unknown", timeout)
                time.sleep(min(exc.retry_after if exc.retry_after is not None else poll_interval, MAX_RETRY_WAIT_S))
                continue
            if on_progress:
                on_progress(job)
            if job.status.is_terminal:
                return job
            _check_deadline(deadline, job_id, job.status.value, timeout)
            time.sleep(poll_interval)

    # -- results -----------------------------------------------------------------------------
    def results(self, job_id: str) -> JobResults:
        """The manifest of a finished job, with presigned part URLs (409 while it runs)."""
        return self._answer(JobResults, "GET", f"/v1/jobs/{job_id}/results")

    def download(self, job_id: str, out_dir: str | os.PathLike) -> list[Path]:
        """Write the job's result files under ``out_dir``: ``parts/<name>.parquet`` for every part
        the manifest lists, ``errors.jsonl`` and ``manifest.json`` (last): the stored manifest, each
        part and the error file with its ``path`` relative to ``out_dir``. Returns the paths written,
        in that order."""
        out = Path(out_dir)
        results = self.results(job_id)
        local_parts = [local_part_path(part.key) for part in results.parts]
        written = [save_url(part.url, out / path, self._files) for part, path in zip(results.parts, local_parts)]
        written.append(save_url(results.errors.url, out / "errors.jsonl", self._files))
        manifest = with_local_paths(results.manifest, local_parts)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        return [*written, out / "manifest.json"]

    def read_table(self, job_id: str):
        """All result parts of a finished job, downloaded and concatenated as one pyarrow Table
        (None if it has no parts)."""
        return self._read_parts(self.results(job_id))

    def read_numpy(self, job_id: str):
        """``(ids, vectors)``: the ids (a list of str, one per row: chunk modes repeat a document's
        id) and the vectors as float32 ``[rows, d]``, decoded from the job's output dtype (a job
        with no parts: ``[0, d]``, or ``[0, 0]`` when nothing was ever embedded)."""
        import numpy as np

        results = self.results(job_id)
        table = self._read_parts(results)
        if table is None:
            return [], np.zeros((0, results.dimensions or 0), dtype=np.float32)
        return table.column("id").to_pylist(), decode_vectors(table, results)

    def _read_parts(self, results: JobResults):
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = [pq.read_table(io.BytesIO(fetch_bytes(part.url, self._files))) for part in results.parts]
        return pa.concat_tables(tables, promote_options="default") if tables else None

    # -- schedules ---------------------------------------------------------------------------
    def create_schedule(self, schedule: dict) -> Schedule:
        """``POST /v1/schedules``: ``{"cron": "0 3 * * *", "input": {"uri": "s3://b/docs/"}, "template": {...}}``."""
        from poolq.products import Schedule

        return self._answer(Schedule, "POST", "/v1/schedules", json=schedule)

    def list_schedules(self) -> list[Schedule]:
        """``GET /v1/schedules``: the caller's schedules (the answer's ``schedules``)."""
        from poolq.api.server.routes.schedules import ScheduleList

        return self._answer(ScheduleList, "GET", "/v1/schedules").schedules

    def get_schedule(self, schedule_id: str) -> ScheduleDetail:
        """The schedule with its recent runs (slot, job_id, status), newest first."""
        from poolq.api.server.routes.schedules import ScheduleDetail

        return self._answer(ScheduleDetail, "GET", f"/v1/schedules/{schedule_id}")

    def delete_schedule(self, schedule_id: str) -> None:
        """``DELETE /v1/schedules/{id}``: the jobs it ran stay."""
        self._call("DELETE", f"/v1/schedules/{schedule_id}")

    def run_schedule(self, schedule_id: str) -> RunView:
        """``POST /v1/schedules/{id}/run``: run it now (incrementally); returns the run (its ``job_id``)."""
        from poolq.products import RunView

        return self._answer(RunView, "POST", f"/v1/schedules/{schedule_id}/run")


def _file_bytes(source: str | os.PathLike | bytes) -> tuple[bytes, str | None]:
    """A file's bytes and its name (None for bytes given as such)."""
    if isinstance(source, bytes):
        return source, None
    return Path(source).read_bytes(), Path(source).name


def _error_from(response: httpx.Response) -> PoolqError:
    try:
        body = response.json()
        detail = _detail(body, response.text) if isinstance(body, dict) else body
    except ValueError:
        detail = response.text
    return PoolqError(response.status_code, detail, _retry_after(response))


def _detail(body: dict, text: str) -> Any:
    """poolq's ``detail``, or the message of OpenAI's ``{"error": {...}}`` (``GET /v1/models``, the OpenAI routes)."""
    error = body.get("error")
    return error["message"] if isinstance(error, dict) and "message" in error else body.get("detail", text)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: not used by poolq


def _check_deadline(deadline: float | None, job_id: str, status: str, timeout: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"job {job_id} still {status} after {timeout}s")

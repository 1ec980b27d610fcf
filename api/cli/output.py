"""How the client verbs of the ``poolq`` CLI report: exit codes, error messages, job summaries.

Every verb that talks to the API is wrapped by :func:`with_client`, which adds ``--api-url`` /
``--api-key`` (``POOLQ_API_URL``, ``POOLQ_API_KEY``), builds the client and turns every expected
failure into one ``error: ...`` message on stderr and an exit code of :class:`ExitCode`; never a
traceback, never the API key.
"""
from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager
from datetime import datetime, timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Callable, Iterator

import click
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from poolq.api.cli.local_stack import describe_store, running_stack
from poolq.api.client.poolq_client import PoolqClient, PoolqConnectionError, PoolqError, PoolqProtocolError
from poolq.api.client.result_files import DownloadError
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobPlace, JobStatus
from poolq.jobs.spec.sink_config import SinkOutcome

if TYPE_CHECKING:
    from poolq.jobs import Settings

DEFAULT_API_URL = "http://127.0.0.1:8000"


class ExitCode(IntEnum):
    """The exit codes of the client verbs (documented in the README)."""

    OK = 0  # done; the job succeeded
    JOB_FAILED = 1  # the job failed or was cancelled
    USAGE = 2  # bad arguments (click's own code)
    UNAVAILABLE = 3  # cannot reach the server, or it failed (5xx, 501)
    NOT_FOUND = 4  # 404: no such job or schedule (or another tenant's)
    REFUSED = 5  # 401, 403, 409, 413, 422, 429 and other 4xx: the server said no
    PARTIAL = 6  # the job partially succeeded (some records failed)
    TIMED_OUT = 7  # --timeout passed while the job was still running
    INTERRUPTED = 130  # Ctrl-C while waiting (the job goes on)


JOB_EXIT_CODES = {JobState.SUCCEEDED: ExitCode.OK, JobState.PARTIALLY_SUCCEEDED: ExitCode.PARTIAL,
                  JobState.FAILED: ExitCode.JOB_FAILED, JobState.CANCELLED: ExitCode.JOB_FAILED}
# A time as the API's JSON writes it (``2026-01-01T00:00:00Z``): what the CLI printed when it read the JSON.
_API_TIME = TypeAdapter(datetime)


def job_exit_code(job: JobStatus) -> ExitCode:
    """The exit code for a job's state: terminal states as in :class:`ExitCode`, others 0."""
    return JOB_EXIT_CODES.get(job.status, ExitCode.OK)


def exit_code_for(error: PoolqError) -> ExitCode:
    """The exit code for an HTTP refusal."""
    if error.status_code == 404:
        return ExitCode.NOT_FOUND
    if error.status_code >= 500:
        return ExitCode.UNAVAILABLE
    return ExitCode.REFUSED


def error_message(error: PoolqError, *, api_key_given: bool = True) -> str:
    """One readable message for an HTTP refusal: the server's detail, 422's fields one per line."""
    detail = error.detail
    if isinstance(detail, list):
        lines = [f"  {_loc(item)}: {item.get('msg', item)}" if isinstance(item, dict) else f"  {item}" for item in detail]
        text = "the request was invalid:\n" + "\n".join(lines)
    else:
        text = str(detail).strip() or "(no detail)"
    if error.status_code == 401 and not api_key_given:
        text += " (no API key given: set POOLQ_API_KEY or pass --api-key)"
    if error.retry_after is not None:
        text += f" (retry after {error.retry_after:g} s)"
    return f"HTTP {error.status_code}: {text}"


def fail(message: str, code: ExitCode) -> None:
    """Print ``error: message`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(int(code))


@contextmanager
def reporting_errors(*, api_key_given: bool) -> Iterator[None]:
    """Turn the client's expected failures into a message and an exit code."""
    try:
        yield
    except PoolqError as exc:
        fail(error_message(exc, api_key_given=api_key_given), exit_code_for(exc))
    except PoolqConnectionError as exc:
        fail(f"{exc} (is it running? set POOLQ_API_URL or pass --api-url; `poolq dev up` starts a local one)",
             ExitCode.UNAVAILABLE)
    except PoolqProtocolError as exc:  # not the poolq API answering: as unavailable, never "the job failed"
        fail(str(exc), ExitCode.UNAVAILABLE)
    except DownloadError as exc:
        fail(str(exc), ExitCode.UNAVAILABLE)
    except TimeoutError as exc:
        fail(str(exc), ExitCode.TIMED_OUT)
    except OSError as exc:  # local files: unreadable input, unwritable --out
        fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc), ExitCode.USAGE)


def with_client(command: Callable) -> Callable:
    """Add ``--api-url``/``--api-key`` and pass a connected ``client`` as the first argument.
    Put it right above the ``def`` (below the command's own options)."""

    @click.option("--api-url", envvar="POOLQ_API_URL", default=None,
                  help=f"the poolq API (env POOLQ_API_URL; default: a running `poolq dev up` stack's, else {DEFAULT_API_URL})")
    @click.option("--api-key", envvar="POOLQ_API_KEY", default=None, show_default=False,
                  help="API key (env POOLQ_API_KEY; default: the local stack's dev key); never printed")
    @functools.wraps(command)
    def wrapper(api_url: str | None, api_key: str | None, **kwargs: object) -> object:
        api_url, api_key = _endpoint(api_url, api_key)
        with reporting_errors(api_key_given=bool(api_key)), PoolqClient(api_url, api_key) as client:
            return command(client, **kwargs)

    return wrapper


def _endpoint(api_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """The API to talk to: the one given; else a running local stack's (with its dev key when
    no key is given); else the default URL."""
    if api_url:
        return api_url, api_key
    state = running_stack("api")
    if state is None:
        return DEFAULT_API_URL, api_key
    return state.api_url, api_key or state.api_key or None


def print_json(value: object) -> None:
    """Pretty JSON on stdout: a response model (or a list of them) as the API's JSON has it."""
    click.echo(json.dumps(to_jsonable_python(value), indent=2, default=str))


def api_time(value: datetime) -> str:
    """A time as the API's JSON writes it: ``2026-01-01T00:00:00Z``."""
    return _API_TIME.dump_python(value, mode="json")


def job_summary(job: JobStatus) -> str:
    """One line: ``job ID succeeded: 40/40 documents, 0 failed, 12,345 tokens in 8.1 s``."""
    counts = job.counts
    total = "?" if counts.total is None else counts.total
    line = (f"job {job.id} {job.status.value}: {counts.completed}/{total} documents, {counts.failed} failed, "
            f"{job.usage.tokens:,} tokens")
    took = seconds_between(job.started_at, job.finished_at)
    if took is not None:
        line += f" in {took:.1f} s"
    if job.errors_by_code and not job.error:  # an error (every record failed) already says why
        by_count = sorted(job.errors_by_code.items(), key=lambda kv: -kv[1])
        line += " (" + ", ".join(f"{count} {code}" for code, count in by_count) + ")"
    return line + (f"; error: {job.error}" if job.error else "")


def job_details(job: JobStatus) -> list[str]:
    """``poolq status``: the summary, then timestamps, the manifest, errors, the webhook and sinks, one per line."""
    lines = [job_summary(job), f"  model      {job.model}"]
    for name, at in (("created", job.created_at), ("started", job.started_at), ("finished", job.finished_at)):
        if at:
            lines.append(f"  {name:10} {api_time(at)}")
    if job.queue:
        lines.append(place_line(job.queue))
    if job.result:
        lines.append(f"  manifest   {job.result.manifest_uri}")
    for message in job.error_samples:
        lines.append(f"  failed     {message}")
    if job.webhook:
        hook = job.webhook
        lines.append(f"  webhook    {hook.type} {hook.state} after {hook.attempts} attempt(s)"
                     + (f": {hook.error}" if hook.error else ""))
    lines += [_sink_line(sink) for sink in job.sinks or ()]
    return lines


def place_line(place: JobPlace) -> str:
    """``  place      1 job ahead · your share 50 % · ETA 0:02:05`` (an unknown ETA: ``-:--:--``)."""
    eta = "-:--:--" if place.eta_s is None else str(timedelta(seconds=round(place.eta_s)))
    ahead = f"{place.jobs_ahead} job{'' if place.jobs_ahead == 1 else 's'} ahead"
    return f"  place      {ahead} · your share {place.tenant_share * 100:.0f} % · ETA {eta}"


def _sink_line(sink: SinkOutcome) -> str:
    """``  sink       search succeeded: 6 upserted, 0 deleted, 0 unchanged`` (or the load's error)."""
    line = f"  sink       {sink.name} {sink.state}"
    if sink.state == "succeeded":
        return line + f": {sink.upserted} upserted, {sink.deleted} deleted, {sink.unchanged} unchanged"
    return line + (f": {sink.error}" if sink.error else "")


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds between two times of the API, None if either is missing."""
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def _loc(item: dict) -> str:
    return ".".join(str(part) for part in item.get("loc", ())) or "(request)"


@contextmanager
def reporting_store_errors(settings: "Settings") -> Iterator[None]:
    """One line naming what was tried and what to set, instead of a botocore traceback."""
    import botocore.exceptions

    from poolq.storage import StorageError

    try:
        yield
    except (StorageError, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        fail(f"cannot use {describe_store(settings)}: {reason} (set POOLQ_S3_ENDPOINT_URL, POOLQ_BUCKET, "
             "POOLQ_S3_ACCESS_KEY_ID and POOLQ_S3_SECRET_ACCESS_KEY, or run `poolq dev up` for a local stack)",
             ExitCode.UNAVAILABLE)

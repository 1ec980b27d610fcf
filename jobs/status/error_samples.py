"""A finished job's failed records, a few per error code, read from the head of its error file: what
the dashboard shows under each reason (the status keeps only the first few messages, of any code)."""
from __future__ import annotations

import io
import json

from pydantic import BaseModel

from poolq.jobs.job_handle import JobHandle

LINES_READ_AT_MOST = 20_000  # the error file can be long; samples come from its head


class ErrorSample(BaseModel):
    id: str | None = None  # the record's id, where it had one
    line: int | None = None  # its line in the input, where it came from a file
    message: str


class ErrorSamples(BaseModel):
    """``GET /v1/jobs/{id}/error-samples``: up to ``per_code`` failed records of each code."""

    job_id: str
    by_code: dict[str, int]
    samples: dict[str, list[ErrorSample]]


def error_samples(job: JobHandle, per_code: int) -> ErrorSamples | None:
    """The samples of ``job``'s error file; None while it has no manifest (not finished)."""
    manifest = job.ledger.manifest()
    if manifest is None:
        return None
    wanted = manifest.errors.by_code
    samples: dict[str, list[ErrorSample]] = {code: [] for code in wanted}
    if manifest.errors.count:
        with job.ctx.store.open(manifest.errors.key) as raw:
            for number, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8")):
                if number >= LINES_READ_AT_MOST or all(len(kept) >= per_code for kept in samples.values()):
                    break
                _keep(json.loads(line), samples, per_code)
    return ErrorSamples(job_id=job.id, by_code=dict(wanted), samples=samples)


def _keep(error: dict, samples: dict[str, list[ErrorSample]], per_code: int) -> None:
    kept = samples.setdefault(str(error.get("code")), [])
    if len(kept) < per_code:
        kept.append(ErrorSample(id=error.get("id"), line=error.get("line"), message=str(error.get("message", ""))))

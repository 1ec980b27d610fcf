"""A batch's stored records, each written once (``batch_layout.py``): what it was asked, what its
input held, whether it was cancelled, how it ended. Its OpenAI status is derived from them."""
from __future__ import annotations

import re
from typing import Literal, TypeVar

from pydantic import BaseModel, Field

from poolq.jobs.context import JobContext
from poolq.products.batches.batch_layout import BatchLayout
from poolq.products.batches.openai_objects import BatchError, RequestCounts
from poolq.storage import ObjectNotFoundError

MAX_WINDOW_S = 7 * 86400
_WINDOW = re.compile(r"^([1-9][0-9]{0,6})([smh])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


def window_seconds(completion_window: str) -> int:
    """``24h`` (OpenAI's only value), or poolq's extension: any ``<n>s``, ``<n>m``, ``<n>h`` up to 7 days."""
    match = _WINDOW.match(completion_window)
    if match is None or not 1 <= int(match.group(1)) * _UNIT_S[match.group(2)] <= MAX_WINDOW_S:
        raise ValueError(f"completion_window {completion_window!r}: give '24h' (or a duration such as '90m', '2h', "
                         "'600s', up to 168h)")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


class BatchRequest(BaseModel):
    """``batch.json``: the batch as created."""

    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    created_at: int
    metadata: dict[str, str] | None = None
    output_expires_after_s: int | None = None  # its output and error files expire this long after they are written

    @property
    def expires_at(self) -> int:
        return self.created_at + window_seconds(self.completion_window)


class PreparedInput(BaseModel):
    """``prepared.json``: what the input file held, and the job running its valid requests."""

    job_id: str | None  # None when no line was valid (the batch failed)
    model: str | None
    total: int  # request lines
    invalid: int  # lines in the error file already (not JSON, duplicate custom_id, ...)
    records: int  # job records (a request with N inputs makes N)
    errors: list[BatchError] = Field(default_factory=list)  # the first few invalid lines, for errors.data
    prepared_at: int


class CancelRequest(BaseModel):
    cancelling_at: int


STEP_FAILURES = "step-failures/"  # one record per step that failed for good: <random>.json


class StepFailure(BaseModel):
    """A step of the batch that failed for good (``batch_advance.give_up_batch`` counts them)."""

    error: str
    at: int


FinalState = Literal["completed", "failed", "expired", "cancelled"]


class BatchOutcome(BaseModel):
    """``result.json``: how the batch ended and where its files are; written last."""

    status: FinalState
    counts: RequestCounts
    output_file_id: str | None = None
    error_file_id: str | None = None
    finalizing_at: int | None = None
    finished_at: int
    errors: list[BatchError] = Field(default_factory=list)


Record = TypeVar("Record", bound=BaseModel)


class BatchRecords:
    """Read and write one batch's records."""

    def __init__(self, ctx: JobContext, layout: BatchLayout, batch_id: str) -> None:
        self.layout, self.batch_id, self.store = layout, batch_id, ctx.store

    def key(self, name: str) -> str:
        return self.layout.batch_record(self.batch_id, name)

    def read(self, name: str, model: type[Record]) -> Record | None:
        try:
            return model.model_validate_json(self.store.get(self.key(name)))
        except ObjectNotFoundError:
            return None

    def write_once(self, name: str, record: BaseModel) -> bool:
        """Write ``record`` unless one is there already (True if this call wrote it)."""
        return self.store.put_once(self.key(name), record.model_dump_json().encode())

    def request(self) -> BatchRequest | None:
        return self.read("batch.json", BatchRequest)

    def prepared(self) -> PreparedInput | None:
        return self.read("prepared.json", PreparedInput)

    def cancel(self) -> CancelRequest | None:
        return self.read("cancel.json", CancelRequest)

    def outcome(self) -> BatchOutcome | None:
        return self.read("result.json", BatchOutcome)

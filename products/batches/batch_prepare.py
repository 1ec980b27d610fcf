"""The validating step: read a batch's input file once, write its valid requests as a poolq
input (one record per result: an input string, a pair) and its invalid lines to the error
file's first part, then submit the job. Every line ends up in exactly one of the two.

A retried step writes the same objects again (same names, same bytes) and finds its job by
idempotency key, so a crash anywhere here is harmless."""
from __future__ import annotations

import json
import logging
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Iterator

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from poolq.jobs.context import JobContext
from poolq.jobs.inputs.record_limits import input_limits
from poolq.jobs.planning.section_scan import chunked
from poolq.jobs.spec.job_spec import InlineDocument, InlineInput, JobSpec, OutputOptions, UriInput
from poolq.jobs.spec.record_ids import MAX_ID_LENGTH
from poolq.jobs.steps.submit import JobRejected, TooManyActiveJobs, submit_job, validate_spec
from poolq.products.batches.batch_files import open_file_content
from poolq.products.batches.batch_layout import BatchLayout
from poolq.products.batches.batch_records import BatchRecords, BatchRequest, PreparedInput
from poolq.products.batches.custom_ids import SeenCustomIds
from poolq.products.batches.formats.endpoint_format import (
    EndpointFormat,
    ModelOutput,
    ParsedRequest,
    PoolqExtension,
    RequestProblem,
    first_problem,
)
from poolq.products.batches.formats.endpoints import ENDPOINT_FORMATS
from poolq.products.batches.formats.output_lines import request_error_line
from poolq.products.batches.openai_objects import BatchError
from poolq.storage import JsonlLineError, read_jsonl

log = logging.getLogger(__name__)

MAX_LISTED_ERRORS = 100  # invalid lines listed in the batch's errors.data (all are in the error file)
EMPTY_FILE_CODE = "empty_file"  # OpenAI's code for an input file with no request line
_CHUNK_BYTES = 1 << 20
# The record fields every batch job carries into its rows: which request a result belongs to.
REQUEST_FIELDS = ("custom_id", "count", "options")


class RequestLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    custom_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    method: str
    url: str
    body: dict[str, JsonValue]


@dataclass
class _Reading:
    """What one pass over the input has found so far."""

    batch_id: str
    endpoint: str
    endpoint_format: EndpointFormat
    ctx: JobContext
    errors_spill: IO[bytes]
    seen: SeenCustomIds
    model: str | None = None
    extension: PoolqExtension | None = None
    output: ModelOutput = field(default_factory=ModelOutput)  # what the job computes on the model, for the responses
    checked: dict[str, tuple[str, str] | None] = field(default_factory=dict)  # model + options -> why not
    total: int = 0
    invalid: int = 0
    records: int = 0
    errors: list[BatchError] = field(default_factory=list)

    def job_lines(self, items: Iterator) -> Iterator[bytes]:
        for item in items:
            self.total += 1
            try:
                custom_id, request = self._request(item)
            except _InvalidLine as bad:
                self._refuse(item.line, bad)
                continue
            for index, record in enumerate(request.records):
                self.records += 1
                yield _dump({"id": f"{item.line}.{index}", **record, "custom_id": custom_id,
                             "count": len(request.records), "options": {**request.options, **self.output.options}})

    def _request(self, item) -> tuple[str, ParsedRequest]:
        if isinstance(item, JsonlLineError):
            raise _InvalidLine(None, item.code, item.message)
        try:
            line = RequestLine.model_validate(item.value)
        except ValidationError as exc:
            where, message = first_problem(exc)
            raise _InvalidLine(_custom_id(item.value), "invalid_request", f"line {item.line}: {where}: {message}",
                               where) from None
        if not self.seen.add(line.custom_id):
            raise _InvalidLine(line.custom_id, "duplicate_custom_id",
                               f"line {item.line}: custom_id {line.custom_id!r} is used by an earlier line", "custom_id")
        if line.method != "POST" or line.url != self.endpoint:
            raise _InvalidLine(line.custom_id, "invalid_url", f"line {item.line}: {line.method} {line.url}: this "
                               f"batch's endpoint is POST {self.endpoint}", "url")
        try:
            request = self.endpoint_format.parse(line.body)
        except RequestProblem as problem:
            raise _InvalidLine(line.custom_id, problem.code, f"line {item.line}: {problem}", problem.param) from None
        self._check_model(request, item.line, line.custom_id)
        return line.custom_id, request

    def _check_model(self, request: ParsedRequest, line: int, custom_id: str) -> None:
        problem = self._servable(request)
        if problem is not None:
            code, param = ("model_not_found", "body.model") if problem[0] == "model" else ("invalid_request", "body.poolq")
            raise _InvalidLine(custom_id, code, f"line {line}: {problem[1]}", param)
        if self.model is not None and request.model != self.model:
            raise _InvalidLine(custom_id, "mismatched_model", f"line {line}: model {request.model!r}; this batch's "
                               f"requests use {self.model!r} (one model per batch)", "body.model")
        if self.extension is not None and request.extension != self.extension:
            raise _InvalidLine(custom_id, "mismatched_options", f"line {line}: body.poolq differs from the batch's first "
                               "request's; one batch runs one set of poolq options", "body.poolq")
        if self.model is None:  # the batch's model, checked servable just now
            self.output = self.endpoint_format.model_output(self.ctx.registry.spec(request.model))
        self.model, self.extension = request.model, request.extension

    def _servable(self, request: ParsedRequest) -> tuple[str, str] | None:
        """Why the server cannot run ``request``'s model with its options (checked once per pair)."""
        key = request.model + "\n" + request.extension.model_dump_json()
        if key not in self.checked:
            spec = job_spec(self.endpoint_format, request.model, request.extension, InlineInput(
                documents=[InlineDocument(id="probe", text="probe", query="probe")]))
            try:
                validate_spec(self.ctx, spec)
                self.checked[key] = None
            except JobRejected as exc:
                self.checked[key] = ("model" if exc.field == "model" else "poolq", str(exc))
        return self.checked[key]

    def _refuse(self, line: int, bad: "_InvalidLine") -> None:
        self.invalid += 1
        self.errors_spill.write(request_error_line(self.batch_id, line, bad.custom_id, bad.code, str(bad), bad.param))
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(BatchError(code=bad.code, message=str(bad), line=line, param=bad.param))


class _InvalidLine(ValueError):
    def __init__(self, custom_id: str | None, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.custom_id, self.code, self.param = custom_id, code, param


def _custom_id(value: dict) -> str | None:
    found = value.get("custom_id")
    return found if isinstance(found, str) else None


def _dump(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def job_spec(endpoint_format: EndpointFormat, model: str, extension: PoolqExtension, job_input,
             dimensions: int | None = None) -> JobSpec:
    """The poolq job of a batch's requests: the endpoint's task, the request fields carried through."""
    return JobSpec(model=model, task=endpoint_format.task, input=job_input, long_documents=extension.long_documents,
                   prompt_name=extension.prompt_name, prompt=extension.prompt,
                   output=OutputOptions(include_fields=[*REQUEST_FIELDS, *endpoint_format.included_fields],
                                        dimensions=dimensions))


def prepare_batch(ctx: JobContext, tenant: str, batch_id: str) -> PreparedInput | None:
    """Read the batch's input and submit its job; None if the tenant is at its active-job limit
    (the batch stays ``validating`` and the next pass tries again)."""
    layout = BatchLayout(ctx.service_layout, tenant)
    records = BatchRecords(ctx, layout, batch_id)
    if (done := records.prepared()) is not None:
        return done
    request = records.request()
    if request is None:
        raise LookupError(f"batch {batch_id} has no batch.json")
    with tempfile.TemporaryFile() as spill, SeenCustomIds() as seen:
        reading = _Reading(batch_id, request.endpoint, ENDPOINT_FORMATS[request.endpoint], ctx, spill, seen)
        with open_file_content(ctx, tenant, request.input_file_id) as content:
            # A tenant's upload: each line bounded while it is read, and a gzip bomb stopped (docs/inputs-and-outputs.md)
            lines = read_jsonl(content, limits=input_limits(ctx.settings))
            ctx.store.put_chunks(layout.job_input(batch_id), chunked(reading.job_lines(lines), _CHUNK_BYTES))
        spill.seek(0)
        ctx.store.put_chunks(records.key("prepared-errors.jsonl"), iter(lambda: spill.read(_CHUNK_BYTES), b""))
    job_id = None
    if reading.records:
        job_id = _submit(ctx, reading, request, layout, tenant)
        if job_id is None:
            return None
    errors = reading.errors if reading.total else [empty_file_error(request.input_file_id)]
    prepared = PreparedInput(job_id=job_id, model=reading.model, total=reading.total, invalid=reading.invalid,
                             records=reading.records, errors=errors, prepared_at=int(time.time()))
    records.write_once("prepared.json", prepared)
    return records.prepared()


def empty_file_error(input_file_id: str) -> BatchError:
    """The batch's error for an input file without a request line (no bytes, or blank lines only), as
    OpenAI reports it: ``empty_file``, no line, the ``input_file_id`` it names."""
    return BatchError(code=EMPTY_FILE_CODE, message=f"input file {input_file_id!r} holds no request line: a batch "
                      "needs at least one JSON line naming custom_id, method, url and body", param="input_file_id")


def _submit(ctx: JobContext, reading: _Reading, request: BatchRequest, layout: BatchLayout, tenant: str) -> str | None:
    if reading.model is None or reading.extension is None:  # pragma: no cover - set by the first valid line
        raise RuntimeError("a valid request without a model")
    job_input = UriInput(uri=ctx.store.uri(layout.job_input(request.id)))
    spec = job_spec(reading.endpoint_format, reading.model, reading.extension, job_input, reading.output.dimensions)
    try:
        return submit_job(ctx, spec, idempotency_key=f"batch:{request.id}", tenant=tenant).id
    except TooManyActiveJobs as exc:
        log.info("batch %s waits: %s", request.id, exc)
        return None

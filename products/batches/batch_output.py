"""A finished batch's files: the output file (one line per request that succeeded, in OpenAI's
shape) and the error file (every other request line: refused when read, failed in the job, or
never run because the batch expired or was cancelled). Every request line is in exactly one.

The output is built from the job's parts, whatever order their rows come in: a request's results
are held until all of them are there (a request's records are consecutive in the job's input,
so at most a shard boundary's worth is held at a time)."""
from __future__ import annotations

import hashlib
import json
import re
from contextlib import closing
from dataclasses import dataclass, field
from typing import Iterator

from poolq.engine.long_documents.policy_check import ONE_RESULT_MODES, narrow_mode_hint
from poolq.jobs.context import JobContext
from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.planning.section_scan import chunked
from poolq.jobs.steps.shards.shard_attempt import GAVE_UP_CODE, UNRUN_CODES
from poolq.products.batches.batch_files import delete_file, write_file
from poolq.products.batches.batch_layout import BatchLayout
from poolq.products.batches.batch_records import BatchRecords, BatchRequest, PreparedInput
from poolq.products.batches.formats.endpoint_format import EndpointFormat, RecordResult, RequestProblem
from poolq.products.batches.formats.endpoints import ENDPOINT_FORMATS
from poolq.products.batches.formats.output_lines import request_error_line, request_id, success_line, unrun_line
from poolq.products.batches.openai_objects import RequestCounts
from poolq.storage import JsonlObject, ObjectNotFoundError, read_jsonl, read_part

_CHUNK_BYTES = 1 << 20
_ROWS_AT_A_TIME = 1024
_JOB_RECORD_PREFIX = re.compile(r"^line \d+ \(id '\d+\.\d+'\): ")
_SERVER_CODES = frozenset({GAVE_UP_CODE})  # failures of the service, not of the request: a 500 line


@dataclass(frozen=True)
class BatchFiles:
    output_file_id: str | None
    error_file_id: str | None
    counts: RequestCounts


@dataclass
class _Results:
    """Requests' results gathered from the parts; failures noted by line."""

    endpoint_format: EndpointFormat
    batch_id: str
    model: str
    failed: dict[int, tuple[str, str]]  # line -> (code, message)
    pending: dict[int, list[RecordResult]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)

    def output_lines(self, tables) -> Iterator[bytes]:
        for table in tables:
            # A few rows at a time as Python values: a whole part's vectors as floats would be ~0.2 GB.
            for row in (row for batch in table.to_batches(max_chunksize=_ROWS_AT_A_TIME) for row in batch.to_pylist()):
                line, index = (int(part) for part in row["id"].split("."))
                if line in self.failed:
                    continue
                fields = {name: row.get(name) for name in self.endpoint_format.included_fields}
                gathered = self.pending.setdefault(line, [])
                gathered.append(RecordResult(index, row[self.endpoint_format.value_column], row["num_tokens"], fields))
                if len(gathered) == row["count"]:
                    yield from self._respond(line, row)

    def _respond(self, line: int, row: dict) -> Iterator[bytes]:
        results = sorted(self.pending.pop(line), key=lambda result: result.index)
        try:
            body = self.endpoint_format.respond(json.loads(row["options"]), results, self.model,
                                                request_id(self.batch_id, line))
        except RequestProblem as problem:
            self.failed[line] = (problem.code, f"line {line}: {problem}")
            return
        self.done.add(line)
        yield success_line(self.batch_id, line, row["custom_id"], body)


def write_batch_files(ctx: JobContext, tenant: str, request: BatchRequest, prepared: PreparedInput,
                      unrun: tuple[str, str] | None) -> BatchFiles:
    """Write the batch's output and error files. ``unrun``: (code, message) for requests the job
    never finished (an expired or cancelled batch); None when it ran to its end."""
    layout = BatchLayout(ctx.service_layout, tenant)
    endpoint_format = ENDPOINT_FORMATS[request.endpoint]
    manifest = JobHandle.of_tenant(ctx, prepared.job_id, tenant).ledger.manifest() if prepared.job_id else None
    results = _Results(endpoint_format, request.id, prepared.model or "", _job_failures(ctx, manifest))
    output_id = _file_id(request.id, "output")
    tables = _part_tables(ctx, manifest, endpoint_format)
    expiry = request.output_expires_after_s
    write_file(ctx, tenant, "batch_output.jsonl", "batch_output", _chunks(results.output_lines(tables)), file_id=output_id,
               expires_after_s=expiry)
    errors = _ErrorLines(request.id, results, unrun)
    error_id = _file_id(request.id, "errors")
    records = BatchRecords(ctx, layout, request.id)
    job_lines = errors.lines(_job_input(ctx, layout.job_input(request.id))) if prepared.job_id else iter(())
    lines = _concat(_raw_lines(ctx, records.key("prepared-errors.jsonl")), job_lines)
    write_file(ctx, tenant, "batch_errors.jsonl", "batch_output", _chunks(lines), file_id=error_id, expires_after_s=expiry)
    counts = RequestCounts(total=prepared.total, completed=len(results.done), failed=prepared.invalid + errors.count)
    # An empty file is not kept: the batch names none.
    if not counts.completed:
        delete_file(ctx, tenant, output_id)
    if not counts.failed:
        delete_file(ctx, tenant, error_id)
    return BatchFiles(output_id if counts.completed else None, error_id if counts.failed else None, counts)


class _ErrorLines:
    """The job's input read again: each request line neither answered nor refused earlier, once."""

    def __init__(self, batch_id: str, results: _Results, unrun: tuple[str, str] | None) -> None:
        self.batch_id, self.results, self.unrun = batch_id, results, unrun
        self.count = 0

    def lines(self, items) -> Iterator[bytes]:
        last = None
        for item in items:
            line = int(item.value["id"].split(".")[0])
            if line == last or line in self.results.done:
                continue
            last = line
            self.count += 1
            yield self._line(line, item.value["custom_id"])

    def _line(self, line: int, custom_id: str) -> bytes:
        failure = self.results.failed.get(line)
        if failure is not None:
            code, message = failure
            return request_error_line(self.batch_id, line, custom_id, code, message,
                                      status_code=500 if code in _SERVER_CODES else 400)
        code, message = self.unrun or ("missing_result", f"line {line}: the job finished without this request's "
                                       "result (a bug: please report it)")
        return unrun_line(self.batch_id, line, custom_id, code, message)


def _job_failures(ctx: JobContext, manifest: JobManifest | None) -> dict[int, tuple[str, str]]:
    """The job's failed records by request line: the first failure of each line."""
    failed: dict[int, tuple[str, str]] = {}
    if manifest is None or manifest.errors is None:
        return failed
    with ctx.store.open(manifest.errors.key) as stream:
        for item in read_jsonl(stream):
            if not isinstance(item, JsonlObject):
                continue  # a line that is not a JSON object names no request
            record_id = item.value.get("id")
            if item.value.get("code") in UNRUN_CODES:
                continue  # stopped (the batch's cancel or expiry, the job's token budget): an unrun request, not a failed one
            if isinstance(record_id, str):
                line, index = record_id.split(".")
                # The job's message names its own input's line and record id: say the request's line instead.
                # A batch takes one result per request: its hint names the modes that give one, where a batch sets them.
                message = narrow_mode_hint(_JOB_RECORD_PREFIX.sub("", item.value["message"]), ONE_RESULT_MODES,
                                           "poolq.long_documents.mode")
                failed.setdefault(int(line), (item.value["code"], f"line {line}: input {index}: {message}"))
    return failed


def _part_tables(ctx: JobContext, manifest: JobManifest | None, endpoint_format: EndpointFormat) -> Iterator:
    columns = ["id", endpoint_format.value_column, "num_tokens", "custom_id", "count", "options",
               *endpoint_format.included_fields]
    for part in manifest.parts if manifest is not None else []:
        yield read_part(ctx.store.get(part.key), columns=columns)


def _job_input(ctx: JobContext, key: str) -> Iterator:
    with closing(ctx.store.open(key)) as stream:
        yield from read_jsonl(stream)


def _raw_lines(ctx: JobContext, key: str) -> Iterator[bytes]:
    try:
        with ctx.store.open(key) as stream:
            yield from iter(lambda: stream.read(_CHUNK_BYTES), b"")
    except ObjectNotFoundError:
        return


def _concat(*parts: Iterator[bytes]) -> Iterator[bytes]:
    for part in parts:
        yield from part


def _chunks(lines: Iterator[bytes]) -> Iterator[bytes]:
    return chunked(lines, _CHUNK_BYTES)


def _file_id(batch_id: str, kind: str) -> str:
    """The same id each time the batch's files are written: the batch's time, then a digest."""
    return f"file-{batch_id.removeprefix('batch_')[:12]}{hashlib.sha256(f'{batch_id}/{kind}'.encode()).hexdigest()[:20]}"

"""``poolq submit | status | wait | results | cancel | jobs``: jobs on a poolq API, over HTTP.

Exit codes: see :class:`poolq.api.cli.output.ExitCode`. stdout carries what scripts read (the job id,
summaries, ``--json``); progress and errors go to stderr.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from poolq.api.cli.delivery_options import JobDelivery, delivery_options
from poolq.api.cli.estimate_report import print_estimate, print_report
from poolq.api.cli.output import ExitCode, api_time, fail, job_details, job_exit_code, job_summary, print_json, with_client
from poolq.api.cli.progress import job_progress
from poolq.api.cli.task_options import add_task_fields, long_documents_option, output_option, prompt_options, task_option
from poolq.api.client.poolq_client import PoolqClient
from poolq.api.client.upload_format import upload_format
from poolq.jobs.ledger.manifest import JobManifest

DTYPES = ("float32", "float16", "int8", "binary")
_poll_option = click.option("--poll-interval", default=1.0, show_default=True, type=click.FloatRange(min=0.05),
                            help="seconds between polls")
_timeout_option = click.option("--timeout", default=None, type=click.FloatRange(min=0),
                               help=f"give up waiting after this many seconds (exit {int(ExitCode.TIMED_OUT)}); the job goes on")
_json_option = click.option("--json", "as_json", is_flag=True, help="print the job status as JSON")


@click.command()
@click.argument("source")
@click.option("--model", default=None, help="model name or allowed Hub id (default: the server's, all-MiniLM-L6-v2)")
@task_option
@click.option("--id-field", default="id", show_default=True)
@click.option("--text-field", default="text", show_default=True)
@long_documents_option
@click.option("--dtype", type=click.Choice(DTYPES), default=None, help="embedding column type (default float32)")
@click.option("--dimensions", type=click.IntRange(min=1), default=None, help="keep the first N dimensions (Matryoshka)")
@output_option
@prompt_options
@click.option("--idempotency-key", default=None, help="the same key returns the same job (safe retries)")
@click.option("--wait", "wait_", is_flag=True, help="wait for the job to finish (exit code by its outcome)")
@click.option("--estimate", "estimate_only", is_flag=True,
              help="submit nothing: print what the job would cost (tokens, rows, cuts, duplicates, time)")
@_poll_option
@_timeout_option
@_json_option
@with_client
@delivery_options
def submit(client: PoolqClient, source: str, model: str | None, task: str | None, id_field: str, text_field: str,
           long_documents: str | None, dtype: str | None, dimensions: int | None, output: str | None, prompt_fields: dict,
           idempotency_key: str | None, wait_: bool, estimate_only: bool, poll_interval: float, timeout: float | None,
           as_json: bool, delivery: JobDelivery) -> None:
    """Submit SOURCE: a local JSONL, .jsonl.gz or Parquet file (uploaded first) or an s3:// URI. Prints the job id
    (with --estimate: the job's estimate, and nothing is submitted; a local file is uploaded all the same)."""
    spec = delivery.add_to(add_task_fields(_spec(model, id_field, text_field, long_documents, dtype, dimensions),
                                           task, output, prompt_fields))
    spec["input"]["uri"] = _input_uri(client, source, spec)
    if estimate_only:
        estimate = client.estimate(spec)
        if as_json:
            print_json(estimate)
        else:
            print_estimate(estimate)
        return
    job = client.submit(spec, idempotency_key=idempotency_key)
    if as_json and not wait_:
        print_json(job)
    elif not as_json:
        click.echo(job.id)
    if wait_:
        _wait_and_exit(client, job.id, poll_interval, timeout, as_json)


@click.command()
@click.argument("job_id")
@_json_option
@with_client
def status(client: PoolqClient, job_id: str, as_json: bool) -> None:
    """Show a job: status, counts, tokens, times. Exit 1/6 if it failed/partially succeeded."""
    job = client.get(job_id)
    if as_json:
        print_json(job)
    else:
        click.echo("\n".join(job_details(job)))
    sys.exit(int(job_exit_code(job)))


@click.command()
@click.argument("job_id")
@_poll_option
@_timeout_option
@_json_option
@with_client
def wait(client: PoolqClient, job_id: str, poll_interval: float, timeout: float | None, as_json: bool) -> None:
    """Wait for a job with a progress bar (documents, tokens/s, ETA); exit code by its outcome."""
    _wait_and_exit(client, job_id, poll_interval, timeout, as_json)


@click.command()
@click.argument("job_id")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="directory for manifest.json, parts/*.parquet and errors.jsonl (default: ./JOB_ID/)")
@click.option("--report", "report_only", is_flag=True, help="download nothing: print the job's data report")
@with_client
def results(client: PoolqClient, job_id: str, out_dir: Path | None, report_only: bool) -> None:
    """Download a finished job's results: every part, the error file and its stored manifest
    (with --report: print its data report instead: lengths, cuts, failures, duplicates)."""
    if report_only:
        report = client.results(job_id).report
        if report is None:
            fail(f"job {job_id} has no data report (it finished before poolq wrote them)", ExitCode.NOT_FOUND)
        else:
            print_report(job_id, report)
        return
    paths = client.download(job_id, out_dir if out_dir is not None else Path(job_id))
    manifest = JobManifest.model_validate_json(paths[-1].read_bytes())
    for part, path in zip(manifest.parts, paths):
        click.echo(f"part      {path}  ({part.rows} rows)")
    click.echo(f"errors    {paths[-2]}  ({manifest.errors.count} records)")
    click.echo(f"manifest  {paths[-1]}")
    counts = manifest.counts
    click.echo(f"job {job_id} {manifest.status.value}: {counts.rows} rows in {len(manifest.parts)} parts; "
               f"{counts.completed} documents embedded, {counts.failed} failed")


@click.command()
@click.argument("job_id")
@_json_option
@with_client
def cancel(client: PoolqClient, job_id: str, as_json: bool) -> None:
    """Cancel a job: running shards stop between batches; committed parts stay."""
    job = client.cancel(job_id)
    if as_json:
        print_json(job)
    else:
        click.echo(f"job {job.id} {job.status.value}")


@click.command()
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 500))
@click.option("--before", default=None, help="a job id: list jobs older than it")
@click.option("--json", "as_json", is_flag=True, help="print the page as JSON")
@with_client
def jobs(client: PoolqClient, limit: int, before: str | None, as_json: bool) -> None:
    """List your jobs, newest first."""
    page = client.jobs(limit=limit, before=before)
    if as_json:
        print_json(page)
        return
    row = "{:<32}  {:<19}  {:>10}  {:>8}  {:>10}  {:>12}  {}"
    click.echo(row.format("JOB", "STATUS", "COMPLETED", "FAILED", "TOTAL", "TOKENS", "CREATED"))
    for job in page.jobs:
        counts = job.counts
        total = "?" if counts.total is None else f"{counts.total:,}"
        click.echo(row.format(job.id, job.status.value, f"{counts.completed:,}", f"{counts.failed:,}", total,
                              f"{job.usage.tokens:,}", api_time(job.created_at)))
    if page.next_before:
        click.echo(f"more: poolq jobs --before {page.next_before}", err=True)


def _wait_and_exit(client: PoolqClient, job_id: str, poll_interval: float, timeout: float | None, as_json: bool) -> None:
    progress = job_progress()
    try:
        job = client.wait(job_id, poll_interval=poll_interval, timeout=timeout, on_progress=progress.update)
    except KeyboardInterrupt:
        progress.close()
        click.echo(f"stopped waiting; job {job_id} goes on (poolq cancel {job_id} stops it)", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    finally:
        progress.close()  # closing twice is harmless
    if as_json:
        print_json(job)
    else:
        click.echo(job_summary(job))
    sys.exit(int(job_exit_code(job)))


def _input_uri(client: PoolqClient, source: str, spec: dict) -> str:
    """SOURCE's URI; a local file is uploaded, after the server has checked the job that will read it
    (bad options fail before anything is sent: a ticket stores nothing until its PUT)."""
    if "://" in source:
        return source
    path = Path(source)
    if not path.is_file():
        raise click.BadParameter(f"{source!r} is not a file (give a JSONL, .jsonl.gz or Parquet file, or an s3:// URI)",
                                 param_hint="SOURCE")
    data = path.read_bytes()
    try:
        file_format = upload_format(data, path.name)
    except ValueError as exc:  # the name says Parquet, the bytes do not
        raise click.BadParameter(str(exc), param_hint="SOURCE") from None
    ticket = client.new_upload(file_format)
    client.validate({**spec, "input": {**spec["input"], "uri": ticket.uri}})
    client.put_upload(ticket, data)
    click.echo(f"uploaded {path} ({len(data):,} bytes, {file_format}) to {ticket.uri}", err=True)
    return ticket.uri


def _spec(model: str | None, id_field: str, text_field: str, long_documents: str | None,
          dtype: str | None, dimensions: int | None) -> dict:
    """The job body, without ``input.uri``."""
    spec: dict = {"input": {"id_field": id_field, "text_field": text_field}}
    if model:
        spec["model"] = model
    if long_documents:
        try:
            spec["long_documents"] = json.loads(long_documents)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--long-documents") from None
    output = {name: value for name, value in (("dtype", dtype), ("dimensions", dimensions)) if value is not None}
    if output:
        spec["output"] = output
    return spec

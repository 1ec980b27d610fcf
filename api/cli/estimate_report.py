"""Readable prints of a dry-run estimate (``poolq submit --estimate``) and of a finished job's data
report (``poolq results JOB --report``), as rich tables on stdout."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from poolq.jobs.report.data_report import DataReport
from poolq.jobs.report.histogram import Histogram
from poolq.products.estimate.job_estimate import JobEstimate


def print_estimate(estimate: JobEstimate, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"estimate: {estimate.model}, {estimate.task}, long_documents {estimate.long_documents_mode}",
                  show_header=False)
    table.add_column(justify="left")
    table.add_column(justify="right")
    rows = [
        ("documents", f"{estimate.documents:,}"), ("characters", f"{estimate.characters:,}"),
        # What the finished job's usage.tokens will say: each text computed once, stored ones copied.
        ("tokens (usage)", f"{estimate.computed_tokens:,}"), ("tokens, every repeat counted", f"{estimate.tokens:,}"),
        ("tokens of whole documents", f"{estimate.document_tokens:,}"),
        ("output rows", f"{estimate.rows:,}"), ("truncated", f"{estimate.truncated:,}"),
        ("chunked", f"{estimate.chunked:,}"), ("split", f"{estimate.split:,}"),
        *((f"would fail: {code}", f"{count:,}") for code, count in estimate.failed.items()),
        ("duplicates", f"{estimate.duplicates.documents:,} ({estimate.duplicates.rate:.1%}, {estimate.duplicates.method}; "
                       f"{estimate.duplicates.tokens:,} tokens)"),
        ("tokens available for reuse", f"{estimate.reuse.tokens:,} ({estimate.reuse.source})"),
        ("workers alive", str(estimate.time.workers_alive)),
        ("worker-seconds", _seconds(estimate.time.worker_seconds)), ("wall time", _seconds(estimate.time.wall_seconds)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if estimate.time.note:
        console.print(f"time: {estimate.time.note}")
    sample = estimate.sample
    console.print(f"sample: {sample.documents:,} documents tokenized, {sample.fraction_read:.0%} of the input read "
                  f"({sample.scan_seconds + sample.price_seconds:.1f} s)")


def print_report(job_id: str, report: DataReport, console: Console | None = None) -> None:
    console = console or Console()
    summary = Table(title=f"data report of job {job_id}", show_header=False)
    summary.add_column()
    summary.add_column(justify="right")
    for name, value in (("documents", f"{report.documents:,}"), ("truncated", f"{report.truncated:,}"),
                        ("chunked", f"{report.chunked:,}"), ("split", f"{report.split:,} ({report.split_chunks:,} rows)"),
                        ("duplicate rate", f"{report.duplicate_rate:.1%} ({report.distinct_method})"),
                        ("reuse rate", "n/a" if report.reuse_rate is None else f"{report.reuse_rate:.1%}"),
                        *((f"failed: {code}", f"{count:,}") for code, count in sorted(report.failed.items()))):
        summary.add_row(name, value)
    console.print(summary)
    console.print(_histogram("document length (tokens)", report.document_tokens))
    if report.chunk_tokens is not None:
        console.print(_histogram("chunk length (tokens)", report.chunk_tokens))
    if report.top_errors:
        console.print("top errors: " + ", ".join(f"{error.code} ({error.count:,})" for error in report.top_errors))


def _histogram(title: str, histogram: Histogram, width: int = 40) -> Table:
    table = Table(title=title)
    table.add_column("tokens", justify="right")
    table.add_column("count", justify="right")
    table.add_column("")
    most = max(histogram.counts, default=0) or 1
    filled = [index for index, count in enumerate(histogram.counts) if count]
    if not filled:
        return table
    for index in range(filled[0], filled[-1] + 1):
        count = histogram.counts[index]
        table.add_row(histogram.labels()[index], f"{count:,}", "█" * round(width * count / most))
    return table


def _seconds(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:,.0f} s" if value < 3600 else f"{value / 3600:,.1f} h"

"""Progress of a job while the CLI waits for it: tokens done of the job's estimate, documents,
tokens/s and the time left (the server's, which counts tokens).

On a terminal a rich progress bar; otherwise (a pipe, a log file, CI) a plain line whenever the
status changes and every ``every_s`` seconds between (counts moving or not: a line a while says
the job and the wait are alive), the last one the final status. A bar off a terminal would show
only its final state. `poolq wait` writes to stderr, so stdout keeps only the job id / summary
for scripts; `poolq demo` to its own console.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Callable

import click

from poolq.api.cli.output import seconds_between
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus

if TYPE_CHECKING:
    from rich.console import Console

#: Seconds between two plain lines while a job's status stays the same.
PLAIN_EVERY_S = 5.0


@dataclass
class Throughput:
    """Rates seen from the client: the change in tokens and documents since the first poll of
    the running job; for a finished job, its tokens over the server's start-to-finish time."""

    clock: Callable[[], float] = time.monotonic
    _first: tuple[float, int, int] | None = field(default=None, init=False)  # (time, tokens, documents)
    tokens_per_s: float | None = field(default=None, init=False)
    documents_per_s: float | None = field(default=None, init=False)

    def observe(self, job: JobStatus) -> None:
        now, tokens, done = self.clock(), _tokens(job), _done(job)
        took = seconds_between(job.started_at, job.finished_at)
        if took:
            self.tokens_per_s, self.documents_per_s = tokens / took, done / took
        elif job.status is JobState.RUNNING and self._first is None:
            self._first = (now, tokens, done)
        elif self._first is not None and now > self._first[0]:
            elapsed = now - self._first[0]
            self.tokens_per_s = (tokens - self._first[1]) / elapsed
            self.documents_per_s = (done - self._first[2]) / elapsed

    def eta_s(self, job: JobStatus) -> float | None:
        """Seconds left: the server's estimate (it counts tokens), else the documents left at the
        current document rate; 0 once finished, None while unknown."""
        total = job.counts.total
        if job.status.is_terminal:
            return 0.0
        if job.rates.eta_s is not None:
            return job.rates.eta_s
        if total is None or not self.documents_per_s:
            return None
        return max(0.0, (total - _done(job)) / self.documents_per_s)


def format_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def format_eta(seconds: float | None) -> str:
    return "-:--:--" if seconds is None else str(timedelta(seconds=round(seconds)))


class RichJobProgress:
    """A rich progress bar on stderr, filled by tokens (what the work is made of):
    ``status ━━━━━━╸━━━ 12/40 documents  1,234 tokens/s  ETA 0:00:08``."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn

        self.rate = Throughput()
        self.progress = Progress(
            TextColumn("{task.description:<12}"), BarColumn(), TextColumn("{task.fields[done]} documents"),
            TextColumn("{task.fields[rate]} tokens/s"), TextColumn("ETA {task.fields[eta]}"),
            console=console, refresh_per_second=8,
        )
        self.task = self.progress.add_task("waiting", total=None, done="0/?", rate="-", eta="-:--:--")
        self.progress.start()

    def update(self, job: JobStatus) -> None:
        self.rate.observe(job)
        total = job.counts.total
        self.progress.update(
            self.task, description=job.status.value, total=_estimated_tokens(job), completed=_tokens(job),
            done=f"{_done(job)}/{'?' if total is None else total}",
            rate=format_rate(self.rate.tokens_per_s), eta=format_eta(self.rate.eta_s(job)),
        )

    def close(self) -> None:
        self.progress.stop()


class PlainJobProgress:
    """Plain lines (on stderr unless ``echo`` says where): on every status change, else one every
    ``every_s`` seconds of ``clock``."""

    def __init__(self, every_s: float = PLAIN_EVERY_S, clock: Callable[[], float] = time.monotonic,
                 echo: Callable[[str], None] = lambda line: click.echo(line, err=True)) -> None:
        self.rate = Throughput(clock)
        self.every_s = every_s
        self.clock = clock
        self.echo = echo
        self._last_status: str | None = None
        self._last_time = 0.0

    def update(self, job: JobStatus) -> None:
        self.rate.observe(job)
        now = self.clock()
        if job.status.value != self._last_status or now - self._last_time >= self.every_s:
            self.echo(self.line(job))
            self._last_status, self._last_time = job.status.value, now

    def line(self, job: JobStatus) -> str:
        total, estimate = job.counts.total, _estimated_tokens(job)
        tokens = f"{_tokens(job):,}" + ("" if estimate is None else f"/~{estimate:,}")
        return (f"{job.id} {job.status.value}: {_done(job)}/{'?' if total is None else total} documents, "
                f"{tokens} tokens, {format_rate(self.rate.tokens_per_s)} tokens/s, ETA {format_eta(self.rate.eta_s(job))}")

    def close(self) -> None:
        pass


def job_progress(console: "Console | None" = None, every_s: float = PLAIN_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> RichJobProgress | PlainJobProgress:
    """A bar when ``console`` (default: stderr's) is a terminal, else plain lines written to it."""
    from rich.console import Console

    shown_on = console or Console(stderr=True)
    if shown_on.is_terminal:
        return RichJobProgress(shown_on)
    if console is None:
        return PlainJobProgress(every_s, clock)  # click's stderr, as `poolq wait` writes its other messages
    # Console.out: the line as written, no markup or highlighting read into it.
    out = console.out
    return PlainJobProgress(every_s, clock, echo=lambda line: out(line, highlight=False))


def _done(job: JobStatus) -> int:
    """Documents done: committed (embedded or failed), plus what running shards did so far."""
    return job.counts.completed + job.counts.failed + job.in_progress.documents


def _tokens(job: JobStatus) -> int:
    return job.usage.tokens + job.in_progress.tokens


def _estimated_tokens(job: JobStatus) -> int | None:
    """The job's tokens in all, as the server estimates them (None before it is planned)."""
    estimated = job.estimate.tokens
    return None if estimated is None else max(estimated, _tokens(job))

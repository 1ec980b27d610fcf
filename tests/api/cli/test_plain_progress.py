"""Progress off a terminal (a pipe, CI's log, `infra/demo.sh | tee`): a plain line on each status
change and every few seconds between, moving or not, and the final status; on a terminal the
live bar. Time is a fake clock, statuses a fixed sequence: nothing waits."""
import io

from rich.console import Console
from support.job_statuses import job_status

from poolq.api.cli.commands.demo_command import _wait_with_progress
from poolq.api.cli.progress import PlainJobProgress
from poolq.jobs.spec.job_status import JobStatus


def _job(status: str, completed: int = 0, tokens: int = 0) -> JobStatus:
    return job_status({"id": "j1", "status": status, "counts": {"total": 40, "completed": completed, "failed": 0},
                       "usage": {"tokens": tokens}})


def test_a_line_every_few_seconds_even_while_counts_stand_still(capsys):
    now = [0.0]
    progress = PlainJobProgress(every_s=5.0, clock=lambda: now[0])
    # A job queued, then running with nothing counted for a while (a model loading), then moving, then done
    polls = [(0, _job("queued")), (1, _job("running")), (4, _job("running")), (7, _job("running")),
             (9, _job("running")), (12, _job("running", 10, 2000)), (13, _job("succeeded", 40, 8000))]
    for at, job in polls:
        now[0] = float(at)
        progress.update(job)
    lines = capsys.readouterr().err.splitlines()
    # Then: each status change, a line 6 s after the last one though nothing moved, 5 s after that, and the final one
    assert [line.split(":")[0] for line in lines] == ["j1 queued", "j1 running", "j1 running", "j1 running",
                                                      "j1 succeeded"], lines
    assert lines[2].startswith("j1 running: 0/40 documents, 0 tokens")
    assert lines[3].startswith("j1 running: 10/40 documents, 2,000 tokens")
    assert lines[4].startswith("j1 succeeded: 40/40 documents, 8,000 tokens")


class _Client:
    """PoolqClient's wait: every poll's status shown to on_progress, at once."""

    def __init__(self, polls: list[JobStatus]) -> None:
        self.polls = polls

    def wait(self, job_id: str, poll_interval: float, timeout: float, on_progress) -> JobStatus:
        for job in self.polls:
            on_progress(job)
        return self.polls[-1]


def _demo_progress(terminal: bool) -> str:
    polls = [_job("queued"), _job("running"), _job("running", 20, 4000), _job("succeeded", 40, 8000)]
    shown = io.StringIO()
    console = Console(file=shown, force_terminal=terminal, width=120, soft_wrap=True)
    assert _wait_with_progress(_Client(polls), "j1", console).status == "succeeded"
    return shown.getvalue()


def test_the_demo_prints_progress_lines_off_a_terminal_and_its_bar_on_one():
    # Off a terminal (infra/demo.sh in CI): one line per status at least, plain text, the final status last
    lines = _demo_progress(terminal=False).splitlines()
    assert [line.split(":")[0] for line in lines] == ["j1 queued", "j1 running", "j1 succeeded"], lines
    assert lines[-1].startswith("j1 succeeded: 40/40 documents, 8,000 tokens") and "━" not in "".join(lines)
    # On a terminal: the live bar, as before
    drawn = _demo_progress(terminal=True)
    assert "━" in drawn and "40/40 documents" in drawn and "j1 succeeded:" not in drawn

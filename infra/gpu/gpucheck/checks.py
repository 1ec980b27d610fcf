"""What a check is, how a list of them runs, and what each run ends as.

A check either passes its gate, fails it, raises (an error: a failure too), or cannot run here and
says why (``NotRun``: a missing package, a spent time budget). Nothing is skipped silently: a check
that did not run is a ``NOT RUN`` line with its reason, and the run's exit code says incomplete.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Callable, Generic, TypeVar

from gpucheck.gates import GateResult

ContextT = TypeVar("ContextT")


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a check failed its gate or raised
    NO_CUDA = 2  # nothing to check: no CUDA device
    MISSING_MODULES = 3  # the engine's own modules are missing: nothing can run
    INCOMPLETE = 4  # nothing failed, but some checks did not run (each says why)
    USAGE = 5  # bad arguments (an unknown --only name, ...)


class NotRun(Exception):
    """Raised by a check that cannot run here; the message says why (and what would make it run)."""


class Status(str, Enum):
    OK = "ok"
    FAIL = "FAIL"
    ERROR = "ERROR"
    NOT_RUN = "NOT RUN"


@dataclass(frozen=True)
class Check(Generic[ContextT]):
    """One line of the plan: ``--dry-run`` lists these fields, a run calls ``run``."""

    name: str
    what: str
    gate: str
    expected_s: float
    run: Callable[[ContextT], GateResult] = field(repr=False, compare=False)
    budget: str = ""  # the time budget it draws on ("matrix"), if any


@dataclass(frozen=True)
class Outcome:
    check: Check
    status: Status
    detail: str
    seconds: float


def select(checks: list[Check], only: list[str]) -> list[Check]:
    """The checks ``only`` names, in plan order: each entry is a check's name or a prefix ending at a
    ``/`` of its name (``matrix/embed`` takes every embed cell). An entry that matches nothing is an
    error naming it and the groups there are."""
    if not only:
        return list(checks)
    unknown = [entry for entry in only if not any(_matches(check.name, entry) for check in checks)]
    if unknown:
        groups = sorted({check.name.split("/")[0] for check in checks})
        raise ValueError(f"--only: {', '.join(map(repr, unknown))} names no check; names start with "
                         f"{', '.join(groups)} (--dry-run lists them all)")
    return [check for check in checks if any(_matches(check.name, entry) for entry in only)]


def _matches(name: str, entry: str) -> bool:
    entry = entry.rstrip("/")
    return name == entry or name.startswith(entry + "/")


def run_checks(checks: list[Check[ContextT]], context: ContextT, budgets: dict[str, float],
               report: Callable[[Outcome], None] = lambda outcome: None,
               clock: Callable[[], float] = time.monotonic) -> list[Outcome]:
    """Run each check in order; a check whose budget would be spent by its expected time is not run.
    ``report`` sees each outcome as it comes (the log line)."""
    spent = {name: 0.0 for name in budgets}
    outcomes = []
    for check in checks:
        start = clock()
        limit = budgets.get(check.budget)
        if limit is not None and spent[check.budget] + check.expected_s > limit:
            outcome = Outcome(check, Status.NOT_RUN, f"the {check.budget} time budget ({limit:.0f} s) is spent", 0.0)
        else:
            outcome = _run_one(check, context, clock, start)
        if check.budget in spent:
            spent[check.budget] += outcome.seconds
        outcomes.append(outcome)
        report(outcome)
    return outcomes


def _run_one(check: Check[ContextT], context: ContextT, clock: Callable[[], float], start: float) -> Outcome:
    try:
        result = check.run(context)
    except NotRun as reason:
        return Outcome(check, Status.NOT_RUN, str(reason), clock() - start)
    except Exception as exc:  # noqa: BLE001 - any exception is this check's failure, and the run goes on
        where = traceback.extract_tb(exc.__traceback__)[-1]
        detail = f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        return Outcome(check, Status.ERROR, detail, clock() - start)
    return Outcome(check, Status.OK if result.passed else Status.FAIL, result.detail, clock() - start)


def exit_code(outcomes: list[Outcome]) -> ExitCode:
    """FAILED if any check failed or raised; else INCOMPLETE if any did not run; else OK."""
    statuses = {outcome.status for outcome in outcomes}
    if statuses & {Status.FAIL, Status.ERROR}:
        return ExitCode.FAILED
    return ExitCode.INCOMPLETE if Status.NOT_RUN in statuses else ExitCode.OK

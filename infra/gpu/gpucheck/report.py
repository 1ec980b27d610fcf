"""What the GPU check prints: the plan (``--dry-run``), a line per check as it ends, the summary, and
the dated markdown table for docs/benchmarks.md ("GPU first contact")."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpucheck.checks import Check, ExitCode, Outcome, Status


@dataclass(frozen=True)
class Environment:
    """The machine and stack a run saw (check.py reads them from torch)."""

    date: str
    device: str  # "NVIDIA H200 (compute capability 9.0)"
    torch: str
    cuda: str
    triton: str
    auto_dtype: str  # what dtype auto resolves to on the device
    supported: str  # the supported stack, and whether this one differs

    def lines(self) -> list[str]:
        return [f"date: {self.date}", f"device: {self.device}; auto -> {self.auto_dtype}",
                f"stack: torch {self.torch}, CUDA {self.cuda}, Triton {self.triton}", f"supported: {self.supported}"]


def plan_table(checks: list[Check], budgets: dict[str, float]) -> str:
    """``--dry-run``: every check with what it runs, its gate and its expected seconds, then the totals."""
    width = max(len(check.name) for check in checks)
    lines = [f"{'check':{width}}  {'expected':>8}  what | gate"]
    lines += [f"{check.name:{width}}  {check.expected_s:>7.0f}s  {check.what} | {check.gate}" for check in checks]
    by_budget = Counter(check.budget for check in checks)
    total = sum(check.expected_s for check in checks)
    lines.append(f"{len(checks)} checks, about {total:.0f} s expected in all")
    for name, limit in budgets.items():
        if not by_budget[name]:
            continue
        expected = sum(check.expected_s for check in checks if check.budget == name)
        lines.append(f"{by_budget[name]} {name} checks: about {expected:.0f} s expected, budget {limit:.0f} s "
                     "(checks past it end NOT RUN)")
    return "\n".join(lines)


def outcome_line(outcome: Outcome) -> str:
    """One line per check as it ends; a check that did not run says so loudly, with why."""
    if outcome.status is Status.NOT_RUN:
        return f"NOT RUN: {outcome.check.name}: {outcome.detail}"
    return f"{outcome.status.value:5} {outcome.check.name} ({outcome.seconds:.1f} s): {outcome.detail}"


def summary(outcomes: list[Outcome], code: ExitCode) -> str:
    counts = Counter(outcome.status for outcome in outcomes)
    parts = ", ".join(f"{counts[status]} {status.value}" for status in Status if counts[status])
    meaning = {ExitCode.OK: "all passed", ExitCode.FAILED: "FAILED", ExitCode.INCOMPLETE: "INCOMPLETE: some checks did not run"}
    return f"{parts or 'no checks'}: exit {int(code)} ({meaning.get(code, code.name)})"


def markdown(environment: Environment, outcomes: list[Outcome], code: ExitCode) -> str:
    """The dated section to paste into docs/benchmarks.md."""
    lines = [f"### GPU first contact, {environment.date}", ""]
    lines += [f"- {line}" for line in environment.lines()[1:]]
    lines += [f"- result: {summary(outcomes, code)}", "", "| check | result | seconds | detail |", "|---|---|---|---|"]
    lines += [f"| {o.check.name} | {o.status.value} | {o.seconds:.1f} | {_cell(o.detail)} |" for o in outcomes]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")

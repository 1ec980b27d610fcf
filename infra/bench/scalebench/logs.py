"""The services' logs after a run: ERROR/WARNING lines and tracebacks, counted with the first distinct messages."""
from __future__ import annotations

import json
import re
from pathlib import Path


def stack_logs(stack_dir: Path) -> list[Path]:
    """Every service's log under a stack's directory: the poolq processes', Redis' and SeaweedFS'."""
    return [*sorted((stack_dir / "logs").glob("*.log")), stack_dir / "redis" / "redis.log",
            stack_dir / "seaweed" / "weed.log"]


def _log_level(line: str) -> tuple[str | None, str]:
    """(level, message) of one log line: poolq's JSON lines, glog (weed: E0102 ...), Redis (``# ``: warning)."""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
            return entry.get("level"), str(entry.get("message", ""))
        except ValueError:
            pass
    if re.match(r"^[EF]\d{4} ", line) or re.search(r"\b(ERROR|CRITICAL)\b", line):
        return "ERROR", line.strip()
    if re.match(r"^W\d{4} ", line) or re.search(r"\bWARNING\b", line):
        return "WARNING", line.strip()
    return None, line.strip()


def _note(samples: list[str], message: str, most: int) -> None:
    if len(samples) < most and message[:160] not in samples:
        samples.append(message[:160])


def scan_logs(paths: list[Path]) -> dict[str, dict]:
    """Per log: ERROR/CRITICAL and WARNING line counts, tracebacks, and the first distinct errors."""
    findings = {}
    for path in paths:
        if not path.exists():
            continue
        errors, warnings, tracebacks, samples, warning_samples = 0, 0, 0, [], []
        with path.open("r", errors="replace") as handle:
            for line in handle:
                level, message = _log_level(line)
                tracebacks += "Traceback (most recent call last)" in line
                if level in ("ERROR", "CRITICAL"):
                    errors += 1
                    _note(samples, message, 5)
                elif level == "WARNING":
                    warnings += 1
                    _note(warning_samples, message, 3)
        if errors or warnings or tracebacks:
            findings[path.name] = {"errors": errors, "warnings": warnings, "tracebacks": tracebacks, "first": samples,
                                   "first_warnings": warning_samples}
    return findings

"""A job's lines in a local stack's logs (``<state_dir>/logs/*.log``: the API's, the workers', beat's).

JSON lines (POOLQ_LOG_FORMAT=json, the default) whose ``job_id`` is the job's come back parsed,
merged across the files in time order (with ``mentions``, also those that only mention its id:
the API's access log, every poll of it); text lines that hold its id come back as text.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LogLine:
    service: str  # the log file's name: api, worker, beat
    text: str  # the line as written
    entry: dict | None  # the parsed JSON object; None for a text line

    @property
    def sort_key(self) -> str:
        return str(self.entry.get("ts", "")) if self.entry else self.text[:23]


def job_log_lines(logs_dir: Path, job_id: str, mentions: bool = False) -> list[LogLine]:
    """The lines of the stack's logs about ``job_id``, in time order (files read line by line)."""
    found = []
    for path in sorted(Path(logs_dir).glob("*.log")):
        with path.open(encoding="utf-8", errors="replace") as handle:
            for raw in handle:
                if job_id not in raw:
                    continue
                line = LogLine(path.stem, raw.rstrip("\n"), _parsed(raw))
                if mentions or line.entry is None or line.entry.get("job_id") == job_id:
                    found.append(line)
    return sorted(found, key=lambda line: line.sort_key)


def _parsed(raw: str) -> dict | None:
    if not raw.startswith("{"):
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None

"""Structured JSON logs, one object per line, carrying the job and shard being worked on.

``log_context(job_id=..., shard=...)`` sets the ids for everything logged inside it (across
threads started inside too, via contextvars). Nothing here ever sees request headers, so API
keys cannot reach a log line through it.
"""
from __future__ import annotations

import contextvars
import json
import logging
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator

_CONTEXT: contextvars.ContextVar[dict] = contextvars.ContextVar("poolq_log_context", default={})


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    token = _CONTEXT.set({**_CONTEXT.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "job_id"?, "shard"?, "exc"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_CONTEXT.get(),
        }
        for name in ("job_id", "shard", "task"):
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_json_logging(level: str = "INFO") -> None:
    """Route the root logger (and uvicorn's, celery's) to one JSON line per record on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True

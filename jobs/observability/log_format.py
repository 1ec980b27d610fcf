"""Structured JSON logs, one object per line, carrying the job and shard being worked on.

``log_context(job_id=..., shard=...)`` sets the ids for everything logged inside it, in this
thread (contextvars: a plain ``threading.Thread`` started inside begins without them). Workers
run each task inside one (``tasks.py``); ``configure_logging`` is called by the worker (Celery's
``setup_logging`` signal), beat, ``poolq serve`` and ``poolq flower``. Nothing here ever sees request headers, so
API keys cannot reach a log line through it; a key a client put in the URL (refused: only the
Authorization header counts) is redacted from uvicorn's access log (``UrlSecretRedactor``).
"""
from __future__ import annotations

import contextvars
import json
import logging
import re
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
    """``{"ts", "level", "logger", "message", "job_id"?, "shard"?, "exc"?}``, and an event's fields
    (``job_events.py``: ``event``, ``tenant``, its counts)."""

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
        entry.update(getattr(record, "event_fields", None) or {})  # a job's story (job_events.py): its fields
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REDACTED = "[redacted]"
# A query parameter whose name says it holds a credential (api_key, key, token, access_token, secret, ...).
_SECRET_PARAMETER = re.compile(r"(?i)([?&;][^=&#;]*(?:key|token|secret|passw|signature|auth|credential)[^=&#;]*=)[^&#;]*")
# A poolq API key (pq_<key_id>_<secret>) anywhere else in a URL: in the path, or under any parameter name.
_POOLQ_KEY = re.compile(r"pq_[0-9a-f]{16}_[A-Za-z0-9_-]+")


def redact_url_secrets(text: str) -> str:
    """``text`` (a request target, say) with credentials in query parameters and poolq keys replaced."""
    return _POOLQ_KEY.sub(REDACTED, _SECRET_PARAMETER.sub(rf"\1{REDACTED}", text))


class UrlSecretRedactor(logging.Filter):
    """Redacts credentials from the strings a record is formatted with: uvicorn's access log line
    carries the request target, query string included, before the API ever refuses a key sent there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_url_secrets(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def configure_json_logging(level: str | int = "INFO") -> None:
    """Route the root logger (and uvicorn's, celery's) to one JSON line per record on stderr."""
    configure_logging("json", level)


def configure_logging(log_format: str, level: str | int = "INFO") -> None:
    """Route the root logger (and uvicorn's, celery's) to stderr: ``json`` (one object per line) or ``text``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    access = logging.getLogger("uvicorn.access")  # a logger's own filters see every record logged to it
    if not any(isinstance(existing, UrlSecretRedactor) for existing in access.filters):
        access.addFilter(UrlSecretRedactor())


def use_celery_logging(log_format: str) -> None:
    """Make Celery (worker or beat, in this process) log through ``configure_logging`` instead of
    installing its own handlers: it asks ``setup_logging`` receivers first. Pool children inherit it."""
    from celery.signals import setup_logging

    def configure(loglevel: int | str | None = None, **_: object) -> None:
        configure_logging(log_format, loglevel or "INFO")

    setup_logging.disconnect(dispatch_uid="poolq-logging")  # the latest call wins
    setup_logging.connect(configure, weak=False, dispatch_uid="poolq-logging")

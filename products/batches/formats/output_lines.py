"""The lines of a batch's output and error files, in OpenAI's shape.

Ids are derived from the batch and the request's line, so a step that writes a file again
writes the same bytes."""
from __future__ import annotations

import hashlib
import json


def _digest(batch_id: str, line: int) -> str:
    return hashlib.sha256(f"{batch_id}\n{line}".encode()).hexdigest()[:32]


def request_id(batch_id: str, line: int) -> str:
    return f"req_{_digest(batch_id, line)}"


def _line_id(batch_id: str, line: int) -> str:
    return f"batch_req_{_digest(batch_id, line)}"


def success_line(batch_id: str, line: int, custom_id: str, body: dict) -> bytes:
    return _dump({"id": _line_id(batch_id, line), "custom_id": custom_id,
                  "response": {"status_code": 200, "request_id": request_id(batch_id, line), "body": body},
                  "error": None})


def request_error_line(batch_id: str, line: int, custom_id: str | None, code: str, message: str,
                       param: str | None = None, status_code: int = 400) -> bytes:
    """A request that was read and refused, or failed: a response with its status and error body."""
    error = {"message": message, "type": "invalid_request_error" if status_code < 500 else "server_error",
             "param": param, "code": code}
    return _dump({"id": _line_id(batch_id, line), "custom_id": custom_id,
                  "response": {"status_code": status_code, "request_id": request_id(batch_id, line),
                               "body": {"error": error}},
                  "error": None})


def unrun_line(batch_id: str, line: int, custom_id: str | None, code: str, message: str) -> bytes:
    """A request that never ran (``batch_expired``, ``batch_cancelled``): no response, an error."""
    return _dump({"id": _line_id(batch_id, line), "custom_id": custom_id, "response": None,
                  "error": {"code": code, "message": message}})


def _dump(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

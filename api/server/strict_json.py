"""Request bodies must be strict UTF-8 JSON; errors say where (line, column), as a 422.

FastAPI answers a body that is not UTF-8 with a bare 400 and a JSON syntax error with a byte
offset; a route class that checks the body first gives the caller a line and column instead.
"""
from __future__ import annotations

import json
from typing import Callable

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    before = raw[:offset]
    line = before.count(b"\n") + 1
    return line, offset - (before.rfind(b"\n") + 1) + 1


def body_errors(raw: bytes) -> list[dict]:
    """The first problems of a JSON body, each with ``loc`` and a message naming line and column."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        return [{"loc": ["body"], "type": "invalid_utf8",
                 "msg": f"the body is not UTF-8: byte 0x{raw[exc.start]:02x} at line {line}, column {column}"}]
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return [{"loc": ["body"], "type": "json_invalid",
                 "msg": f"the body is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"}]
    return []


class StrictJsonRoute(APIRoute):
    """Checks JSON bodies before FastAPI parses them (the body is read once and cached)."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH") and "json" in request.headers.get("content-type", ""):
                raw = await request.body()
                errors = body_errors(raw) if raw else []
                if errors:
                    raise RequestValidationError(errors)
            return await handler(request)

        return strict_handler

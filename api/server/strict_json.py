"""Request bodies must be strict UTF-8 JSON; errors say where (line, column, field), as a 422.

FastAPI answers a body that is not UTF-8 with a bare 400, a JSON syntax error with a byte
offset, and a body nested too deeply or holding a 5,000-digit number with a 500. A route class
that checks the body first gives the caller a 422 naming the problem instead. It also validates
the body model in pydantic's strict mode (``"dimensions": true`` or ``"128"`` are not numbers),
and refuses strings holding lone UTF-16 surrogates, which no store or file can encode.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Callable

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from poolq.storage import lone_surrogate_path, nested_too_deeply


def _position(raw: bytes, offset: int) -> tuple[int, int]:
    before = raw[:offset]
    line = before.count(b"\n") + 1
    return line, offset - (before.rfind(b"\n") + 1) + 1


def _error(kind: str, message: str) -> list[dict]:
    return [{"loc": ["body"], "type": kind, "msg": message}]


def body_errors(raw: bytes) -> list[dict]:
    """The first problems of a JSON body, each with ``loc`` and a message naming where."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        return _error("invalid_utf8", f"the body is not UTF-8: byte 0x{raw[exc.start]:02x} at line {line}, column {column}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return _error("json_invalid", f"the body is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
    except RecursionError:
        return _error("json_invalid", "the body is nested too deeply to be a job")
    except ValueError:  # the other ValueError of json.loads: an integer past Python's digit limit
        return _error("json_invalid", f"the body holds a number of more than {sys.get_int_max_str_digits()} digits")
    if nested_too_deeply(value, text):
        return _error("json_invalid", "the body is nested too deeply to be a job")
    where = lone_surrogate_path(value, "body")
    if where is not None:
        return _error("invalid_unicode", f"{where} holds a lone UTF-16 surrogate escape, which is no character")
    return []


def strict_model_errors(model: type[BaseModel], raw: bytes) -> list[dict]:
    """``raw`` validated as ``model`` in strict mode (from JSON: enums from their values, arrays
    as tuples, but no number from a string or a boolean); pydantic's errors under ``body``."""
    try:
        model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        return [{"loc": ["body", *error["loc"]], "type": error["type"], "msg": error["msg"]}
                for error in exc.errors(include_url=False, include_context=False, include_input=False)]
    return []


def _errors(content_type: str, raw: bytes, takes_json: bool) -> list[dict]:
    if not raw:
        return []
    media_type = content_type.split(";", 1)[0].strip().lower()  # media types are case-insensitive
    if takes_json and not (media_type == "application/json" or media_type.endswith("+json")):
        shown = media_type or "none"
        return _error("content_type", f"the body must be JSON, sent with Content-Type: application/json (got {shown})")
    return body_errors(raw) if "json" in media_type else []


def strict_body(body_model: type[BaseModel]) -> Any:
    """``Depends`` validating the raw body as ``body_model`` in strict mode; list it after auth."""
    async def check(request: Request) -> None:
        raw = await request.body()
        errors = strict_model_errors(body_model, raw) if raw else []
        if errors:
            raise RequestValidationError(errors)

    return Depends(check)


async def answer_validation_error(request: Request, exc: RequestValidationError) -> Response:
    """422 with each error's ``loc``, ``type`` and ``msg``, never the offending input: echoing it
    back can fail to encode (lone surrogates, bytes that are not UTF-8) and turn a 422 into a 500."""
    errors = [{"loc": list(error.get("loc", ())), "type": str(error.get("type", "")), "msg": str(error.get("msg", ""))}
              for error in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=422)


class StrictJsonRoute(APIRoute):
    """Checks JSON bodies before FastAPI parses them (the body is read once and cached). The body
    model's strict validation is a dependency (``strict_body``) a route lists after its
    authentication, so an unauthenticated caller hears 401 first, as with FastAPI's own checks."""

    def get_route_handler(self) -> Callable:
        body_model = self._body_model()
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH"):
                raw = await request.body()
                errors = _errors(request.headers.get("content-type", ""), raw, body_model is not None)
                if errors:
                    raise RequestValidationError(errors)
            return await handler(request)

        return strict_handler

    def _body_model(self) -> type[BaseModel] | None:
        annotation = self.body_field.field_info.annotation if self.body_field is not None else None
        return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None

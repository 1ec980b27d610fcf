"""Request bodies must be strict UTF-8 JSON; errors say where (line, column, field), as a 422
(OpenAI's 400 on OpenAI's routes: ``openai_errors.py`` answers).

FastAPI answers a body that is not UTF-8 with a bare 400, a JSON syntax error with a byte
offset, and a body nested too deeply or holding a 5,000-digit number with a 500. A route class
that checks the body first gives the caller a 422 naming the problem instead. It also validates
the body model in pydantic's strict mode (``"dimensions": true`` or ``"128"`` are not numbers),
refuses strings holding lone UTF-16 surrogates, which no store or file can encode, and objects
naming a key twice (``json.loads`` would keep the last silently: a caller who sent two ``model``
keys would get a job of the model it did not mean).
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


class _RepeatedKey(dict):
    """A parsed JSON object in which ``key`` came more than once."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise ValueError("no key repeats")  # only called for objects with fewer keys than pairs


def _parse(text: str) -> tuple[Any, bool]:
    """``text`` parsed, and whether an object in it repeats a key (each such object marked, for
    :func:`_repeated_key` to find where; the value of a repeated key is the last one, as ``json.loads``')."""
    repeats: list[_RepeatedKey] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
        value = dict(pairs)
        if len(value) == len(pairs):
            return value
        repeats.append(_RepeatedKey(pairs, _first_repeated(pairs)))
        return repeats[-1]

    return json.loads(text, object_pairs_hook=pairs_hook), bool(repeats)


def _repeated_key(value: object) -> list[dict]:
    """An error naming the first object of ``value`` that repeats a key, by its path (none if no object does)."""
    pending: list[tuple[object, tuple]] = [(value, ())]
    while pending:  # iterative: the value may be nested as deep as json.loads allows
        current, path = pending.pop()
        if isinstance(current, _RepeatedKey):
            where = ".".join(map(str, ("body", *path))) if path else "the body"
            return [{"loc": ["body", *path, current.key], "type": "duplicate_key",
                     "msg": f"{where} names the key {current.key!r} twice; a JSON object names each key once"}]
        children = current.items() if isinstance(current, dict) else enumerate(current) if isinstance(current, list) else ()
        pending.extend((item, (*path, name)) for name, item in reversed(list(children)))
    return []


def body_errors(raw: bytes) -> list[dict]:
    """The first problems of a JSON body, each with ``loc`` and a message naming where."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        line, column = _position(raw, exc.start)
        return _error("invalid_utf8", f"the body is not UTF-8: byte 0x{raw[exc.start]:02x} at line {line}, column {column}")
    try:
        value, repeats = _parse(text)
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
    return _repeated_key(value) if repeats else []


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

"""Error answers in the shape the caller's route speaks: OpenAI's on OpenAI's routes, poolq's on the rest.

OpenAI's clients (the official ``openai`` package, LangChain, LlamaIndex) read an error's message,
``type``, ``param`` and ``code`` from ``{"error": {...}}`` and raise by status (400 for any invalid
request); given FastAPI's ``{"detail": ...}`` they show only ``Error code: 422``. So every error on
the routes under :data:`OPENAI_PATH_PREFIXES` (their unknown sub-paths too) is OpenAI's shape, and a
refused request there is 400, not 422; poolq's own routes keep ``{"detail": ...}``, which their
clients read. The exception handlers here, ``unavailable.py`` and the body limit all answer through
:func:`error_response`, the one place that picks the shape.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from poolq.api.server.guards.disconnects import log_if_disconnected
from poolq.api.server.guards.security import AUTH_RESPONSES
from poolq.api.server.guards.strict_json import answer_validation_error
from poolq.api.server.schemas import OpenAIErrorBody, OpenApiResponses

# The routes OpenAI's API defines, declared once: their errors are OpenAI's shape.
OPENAI_PATH_PREFIXES = ("/v1/files", "/v1/batches", "/v1/embeddings", "/v1/models")
# Where a validation error's ``loc`` starts with where the value came from, which OpenAI's ``param`` leaves out.
_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})


@dataclass(frozen=True)
class ErrorKind:
    """OpenAI's ``type`` for a status, and the ``code`` of an error that names none of its own."""

    type: str
    code: str | None = None


_KINDS: Mapping[int, ErrorKind] = {
    400: ErrorKind("invalid_request_error"),
    401: ErrorKind("authentication_error", "invalid_api_key"),
    403: ErrorKind("permission_error", "insufficient_permissions"),
    404: ErrorKind("invalid_request_error", "not_found"),
    405: ErrorKind("invalid_request_error", "method_not_allowed"),
    409: ErrorKind("invalid_request_error", "conflict"),
    413: ErrorKind("invalid_request_error", "request_too_large"),
    429: ErrorKind("rate_limit_error", "rate_limit_exceeded"),
    503: ErrorKind("server_error", "service_unavailable"),
}


def speaks_openai(path: str) -> bool:
    """Whether ``path`` is one of OpenAI's routes (or under one)."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in OPENAI_PATH_PREFIXES)


def _kind(status_code: int) -> ErrorKind:
    return _KINDS.get(status_code) or ErrorKind("server_error" if status_code >= 500 else "invalid_request_error")


def error_body(path: str, status_code: int, message: str, *, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer on ``path``: ``{"error": {...}}`` on OpenAI's routes, else ``{"detail": message}``."""
    if not speaks_openai(path):
        return {"detail": message}
    kind = _kind(status_code)
    return {"error": {"message": message, "type": kind.type, "param": param, "code": code or kind.code}}


def error_response(request: Request, status_code: int, message: str, *,
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An error answer to ``request`` in its route's shape (``headers``, say Retry-After, kept)."""
    return JSONResponse(error_body(request.url.path, status_code, message), status_code=status_code,
                        headers=dict(headers) if headers else None)


def param_of(loc: Sequence[object]) -> str | None:
    """A validation error's ``loc`` as OpenAI's ``param``: its dotted path in the body or query
    (``("body", "input", 3)`` -> ``input.3``); None for the body as a whole."""
    path = loc[1:] if loc and loc[0] in _SOURCES else loc
    return ".".join(str(part) for part in path) or None


def _described(error: Mapping[str, Any]) -> str:
    loc = tuple(error.get("loc", ()))
    if loc == ("body",) and error.get("type") == "missing":  # FastAPI's bare "Field required" names nothing
        return "the request body is empty: send a JSON object (Content-Type: application/json)"
    param = param_of(loc)
    message = str(error.get("msg", ""))
    return f"{param}: {message}" if param else message


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # registered for HTTPException only
        raise exc
    await log_if_disconnected(request, exc)
    if not speaks_openai(request.url.path):
        return await http_exception_handler(request, exc)
    return error_response(request, exc.status_code, str(exc.detail), headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    """A refused request: poolq's 422 listing each error, or OpenAI's 400 naming the first
    error's field (``param``) and kind (``code``), with every error's message in ``message``."""
    if not isinstance(exc, RequestValidationError):  # registered for RequestValidationError only
        raise exc
    if not speaks_openai(request.url.path):
        return await answer_validation_error(request, exc)
    errors = list(exc.errors()) or [{"loc": ("body",), "type": "invalid_request", "msg": "invalid request"}]
    first = errors[0]
    body = error_body(request.url.path, 400, "; ".join(_described(error) for error in errors),
                      param=param_of(tuple(first.get("loc", ()))), code=str(first["type"]) if first.get("type") else None)
    return JSONResponse(body, status_code=400)


def _documented_without_422(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` without the 422 FastAPI lists on every route with parameters: OpenAI's
    routes answer a refused request 400 (documented by :data:`OPENAI_RESPONSES`)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # FastAPI's, cached on the app after the first call
        for path, operations in schema.get("paths", {}).items():
            if speaks_openai(path):
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
        return schema

    return openapi


def install_error_answers(app: FastAPI) -> None:
    """Answer HTTP errors and refused requests in each route's shape; document OpenAI's routes so."""
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.openapi = _documented_without_422(app)  # type: ignore[method-assign]


def openai_responses(responses: OpenApiResponses) -> OpenApiResponses:
    """``responses`` (a route's error answers, OpenAPI ``responses=``) with OpenAI's error body."""
    return {code: {**response, "model": OpenAIErrorBody} for code, response in responses.items()}


# What OpenAI's routes may answer (OpenAPI ``responses=``): authentication's answers, and, where
# the route takes parameters or a body, a refused request.
OPENAI_AUTH_RESPONSES: OpenApiResponses = openai_responses(AUTH_RESPONSES)
OPENAI_RESPONSES: OpenApiResponses = {
    400: {"model": OpenAIErrorBody, "description": "the request is not valid: `param` names the field"},
    **OPENAI_AUTH_RESPONSES,
}

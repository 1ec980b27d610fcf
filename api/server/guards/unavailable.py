"""Outages of the store, Redis or the broker answer 503 with ``Retry-After``, never a 500.

Which errors are transient is declared once, in ``poolq.jobs.steps.failures``; this module only
says what such an error means over HTTP: try again shortly.
"""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from poolq.api.server.openai_errors import error_response
from poolq.jobs import RETRYABLE_ERRORS, describe, is_retryable

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5


def install_unavailable_handlers(app: FastAPI) -> None:
    for error in RETRYABLE_ERRORS:
        app.add_exception_handler(error, _answer)


async def _answer(request: Request, exc: Exception) -> JSONResponse:
    if not is_retryable(exc):  # a permanent store error (a missing object) that a route did not expect
        log.error("%s %s failed: %s", request.method, request.url.path, describe(exc))
        return error_response(request, 500, "internal error")
    log.warning("%s %s: a dependency is unavailable: %s", request.method, request.url.path, describe(exc))
    return error_response(request, 503, "a service poolq depends on (object store, Redis or the broker) is unavailable; "
                                        f"try again in {RETRY_AFTER_S} s", headers={"Retry-After": str(RETRY_AFTER_S)})

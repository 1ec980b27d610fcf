"""A client that goes away before its request body ended: an everyday event, not a server error.

Starlette raises ``ClientDisconnect`` where the route reads the body; unhandled, uvicorn logs it
as an ERROR with a traceback. Here it is one INFO line; the answer (400) reaches no one. (Where
FastAPI parses a form body it turns the disconnect into its own 400 first: that one is logged
the same way.)
"""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

log = logging.getLogger(__name__)


def install_disconnect_handler(app: FastAPI) -> None:
    app.add_exception_handler(ClientDisconnect, _client_gone)


async def _client_gone(request: Request, exc: Exception) -> Response:
    client = request.client.host if request.client else "unknown"
    log.info("%s %s: the client (%s) disconnected before its request body ended", request.method, request.url.path,
             client)
    return Response(status_code=400)


async def log_if_disconnected(request: Request, exc: HTTPException) -> None:
    """An HTTPException caused by a disconnect (FastAPI's 400 for a form cut off) is logged as one
    (INFO); the handler of HTTPExceptions (``openai_errors.py``) calls this before it answers."""
    if isinstance(exc.__cause__, ClientDisconnect):
        await _client_gone(request, exc.__cause__)

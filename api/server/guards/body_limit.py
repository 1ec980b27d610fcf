"""Reject request bodies over a size limit while they stream in, never reading them whole.

Starlette and FastAPI impose no body limit of their own. A declared ``Content-Length`` over the
limit is refused before a byte is read; a chunked body is counted as it arrives and refused
(413) as soon as it passes the limit.
"""
from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from poolq.api.server.openai_errors import error_body

# A multipart upload's headers and form fields around the file itself.
MULTIPART_OVERHEAD_BYTES = 64 << 10

# What a client refused at the default limit can do instead, by path: a job reads its input from the store
_UPLOAD_HINT = "upload large inputs with POST /v1/uploads and pass their s3:// URI"
_HINTS = {"/v1/embeddings": "send fewer inputs per request, or embed them with a job: POST /v1/jobs"}


class BodySizeLimitMiddleware:
    """``max_bytes`` for every request; ``limits``: another limit for a path (file uploads)."""

    def __init__(self, app: ASGIApp, max_bytes: int, limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.limits = limits or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        max_bytes = self.limits.get(path, self.max_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            await self._refuse(send, path, max_bytes)
            return
        received = 0
        response_started = refused = False

        async def counting_receive() -> Message:
            # Past the limit: answer 413 ourselves, and tell the app the client went away.
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    refused = True
                    if not response_started:
                        await self._refuse(send, path, max_bytes)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if refused:
                return  # our 413 is the answer; drop whatever the app says after the disconnect
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise

    async def _refuse(self, send: Send, path: str, max_bytes: int) -> None:
        hint = "" if max_bytes != self.max_bytes else f"; {_HINTS.get(path, _UPLOAD_HINT)}"
        body = json.dumps(error_body(path, 413, f"request body larger than {max_bytes} bytes{hint}")).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

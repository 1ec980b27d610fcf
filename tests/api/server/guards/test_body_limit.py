"""Oversize bodies are refused with 413 while streaming, without being read whole."""
import asyncio

from fastapi import FastAPI, Request

from poolq.api.server.guards.body_limit import BodySizeLimitMiddleware


def _app(seen: list[int]):
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        body = await request.body()
        seen.append(len(body))
        return {"bytes": len(body)}

    return BodySizeLimitMiddleware(app, max_bytes=1000)


async def _call(app, chunks: list[bytes], headers: list[tuple[bytes, bytes]], path: str = "/echo", sent=None):
    """Drive the ASGI app by hand so we can count how much of the body it pulled."""
    pulled = []
    pending = list(chunks)

    async def receive():
        if not pending:
            return {"type": "http.disconnect"}
        chunk = pending.pop(0)
        pulled.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    sent = [] if sent is None else sent

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b"",
             "http_version": "1.1", "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    await app(scope, receive, send)
    return sent[0]["status"], sum(pulled), len(chunks)


def test_a_declared_oversize_body_is_refused_before_reading_any_of_it():
    seen: list[int] = []
    status, pulled, _ = asyncio.run(_call(_app(seen), [b"x" * 600] * 10, [(b"content-length", b"6000")]))
    assert (status, pulled, seen) == (413, 0, [])


def test_a_chunked_oversize_body_is_cut_off_once_it_passes_the_limit():
    seen: list[int] = []
    status, pulled, total = asyncio.run(_call(_app(seen), [b"x" * 600] * 10, [(b"transfer-encoding", b"chunked")]))
    assert status == 413 and pulled == 1200 and seen == []  # two chunks read of ten, the route never ran


def test_bodies_within_the_limit_pass():
    seen: list[int] = []
    status, _, _ = asyncio.run(_call(_app(seen), [b"x" * 500, b"y" * 500], [(b"content-length", b"1000")]))
    assert (status, seen) == (200, [1000])


def test_the_413_says_what_a_client_of_that_route_can_do_instead():
    import json

    def message(path: str) -> str:
        sent: list[dict] = []
        asyncio.run(_call(_app([]), [b"x" * 2000], [(b"content-length", b"2000")], path=path, sent=sent))
        body = json.loads(sent[1]["body"])  # poolq's own routes say detail; OpenAI's routes their envelope
        return body["error"]["message"] if "error" in body else body["detail"]

    assert "POST /v1/uploads" in message("/v1/jobs")  # a job reads its input from the store
    embeddings = message("/v1/embeddings")  # this route reads no URI: fewer inputs, or a job
    assert "send fewer inputs per request" in embeddings and "/v1/uploads" not in embeddings

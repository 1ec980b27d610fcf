"""An authenticated TestClient over an in-process job context, and a transport that sends a
PoolqClient's (or the CLI's) requests to it."""
from __future__ import annotations

import httpx
from fastapi.testclient import TestClient

from poolq.api.server.app import create_app
from poolq.jobs.spec.job_status import LOCAL_TENANT


def authed_client(ctx, settings=None, *, tenant: str = LOCAL_TENANT, admin: bool = True, **app_kwargs) -> TestClient:
    """The API over ``ctx`` with a fresh key of ``tenant`` (default: the tenant of in-process
    submissions, so jobs submitted with ``submit_job`` are visible). ``client.api_key`` is the key."""
    app = create_app(ctx, settings or ctx.settings, **app_kwargs)
    key, _ = app.state.keys.create(tenant, admin=admin)
    client = TestClient(app, headers={"Authorization": f"Bearer {key}"})
    client.api_key = key
    return client


class InProcessTransport(httpx.BaseTransport):
    """Sends an httpx client's requests (a PoolqClient's: ``transport=``) to the in-process app."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.client.request(request.method, request.url.raw_path.decode(), content=request.content,
                                       headers=dict(request.headers))
        return httpx.Response(response.status_code, headers=response.headers, content=response.content)

"""The app under fuzz: an in-process API over a local store whose jobs are accepted and never
run, rate and active-job limits out of the way, one real API key, server errors as 500s."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings

FUZZ_TENANT = "fuzz-tenant"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(store="local", local_store_root=tmp_path_factory.mktemp("api-fuzz") / "store", bucket="bucket",
                        output_prefix="jobs", allow_file_inputs=False, rate_limit_per_s=1e6, rate_limit_burst=10 ** 6,
                        max_active_jobs_per_tenant=10 ** 6)
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create(FUZZ_TENANT)
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {key}"}) as test_client:
        yield test_client

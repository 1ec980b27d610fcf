"""A sink that fails marks the sink, not the job, names the error without the credential, and a
retry (``POST /v1/jobs/{id}/sinks/retry``) loads the committed parts without recomputing them.
Tenants use only the sinks granted to them."""
import json
import logging

import pytest
from support.api_client import authed_client
from support.engine_doubles import CountingEngine

from poolq.devtools.devstack.ports import free_port
from poolq.devtools.devstack.postgres_server import PostgresServer
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.sinks.sink_access import SinkNotAllowed, check_sink_access
from poolq.worker.local_runner import local_context

pytestmark = pytest.mark.integration
PASSWORD = "s3cret-pw-never-shown"
DOCUMENTS = [{"id": f"d{i}", "text": f"document number {i} about sinks"} for i in range(6)]


@pytest.fixture
def port():
    return free_port()


@pytest.fixture
def engine(minilm_engine):
    return CountingEngine(minilm_engine)


def _client(tmp_path, engine, settings, tenant="local"):
    ctx = local_context(tmp_path / "store", settings)
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    return ctx, authed_client(ctx, tenant=tenant)


def test_a_failed_load_is_the_sinks_and_a_retry_loads_without_recomputing(tmp_path, engine, port, caplog):
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/postgres"
    settings = Settings(sinks={"search-db": url}, sink_grants={"local": ["search-db"]})
    ctx, client = _client(tmp_path, engine, settings)
    caplog.set_level(logging.DEBUG)
    job = client.post("/v1/jobs", json={"input": {"documents": DOCUMENTS}, "sink": "search-db"}).json()
    status = client.get(f"/v1/jobs/{job['id']}").json()
    assert status["status"] == "succeeded"  # the job is done; only its sink failed
    results = client.get(f"/v1/jobs/{job['id']}/results").json()
    [failed] = results["sinks"]
    assert failed["name"] == "search-db" and failed["state"] == "failed"
    assert "PostgreSQL" in failed["error"] and "connect" in failed["error"]
    assert status["sinks"] == results["sinks"]  # the job's status shows its sink loads too
    manifest = ctx.store.get(f"{results['errors']['key'].rsplit('/', 1)[0]}/manifest.json").decode()
    for seen in (json.dumps(status), json.dumps(results), manifest, caplog.text):
        assert PASSWORD not in seen and url not in seen
    embedded = len(engine.keys)

    with PostgresServer(port=port):
        response = client.post(f"/v1/jobs/{job['id']}/sinks/retry")
        assert response.status_code == 202 and response.json()["retried"] == ["search-db"]
        [loaded] = client.get(f"/v1/jobs/{job['id']}/results").json()["sinks"]
        assert (loaded["state"], loaded["upserted"], loaded["deleted"], loaded["unchanged"], loaded["error"]) == (
            "succeeded", len(DOCUMENTS), 0, 0, None)
        assert client.get(f"/v1/jobs/{job['id']}").json()["sinks"] == [loaded]
        assert client.post(f"/v1/jobs/{job['id']}/sinks/retry").status_code == 409  # nothing failed now
    assert len(engine.keys) == embedded  # nothing was embedded again
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("sink, grants, task", [
    ("search-db", {}, "embed"),  # configured, not granted to this tenant
    ("elsewhere", {"local": ["elsewhere"]}, "embed"),  # granted, never configured
    ("search-db", {"local": ["search-db"]}, "token_embed"),  # pgvector keeps one vector per row
])
def test_a_sink_the_tenant_may_not_use_is_refused_naming_the_field(tmp_path, engine, sink, grants, task):
    settings = Settings(sinks={"search-db": f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/postgres"}, sink_grants=grants)
    _, client = _client(tmp_path, engine, settings)
    response = client.post("/v1/jobs", json={"input": {"documents": DOCUMENTS}, "sink": sink, "task": task})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][-1] == "sink" and PASSWORD not in response.text


def test_a_job_without_a_sink_has_nothing_to_retry(tmp_path, engine):
    _, client = _client(tmp_path, engine, Settings())
    job = client.post("/v1/jobs", json={"input": {"documents": DOCUMENTS}}).json()
    assert client.get(f"/v1/jobs/{job['id']}/results").json()["sinks"] is None
    assert client.post(f"/v1/jobs/{job['id']}/sinks/retry").status_code == 409


def test_a_task_without_vectors_is_refused_before_it_runs():
    settings = Settings(sinks={"search-db": "memory://x"}, sink_grants={"local": ["search-db"]})
    spec = JobSpec(input={"documents": DOCUMENTS}, task="classify", sink="search-db")
    with pytest.raises(SinkNotAllowed, match="no vectors to load"):
        check_sink_access(spec, "local", settings)
    check_sink_access(spec.model_copy(update={"task": "sparse_embed"}), "local", settings)  # sparse vectors load
    with pytest.raises(SinkNotAllowed, match="not configured for tenant 'other'"):
        check_sink_access(spec.model_copy(update={"task": "embed"}), "other", settings)

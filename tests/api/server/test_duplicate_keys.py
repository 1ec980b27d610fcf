"""A JSON body naming a key twice is refused, naming the key and where it is (``json.loads`` would
keep the last value silently): 422 on poolq's job routes, OpenAI's 400 on ``/v1/embeddings``."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.security_app import holding_context

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings

DOCS = '{"documents": [{"id": "a", "text": "x"}]}'
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(store="local", local_store_root=tmp_path_factory.mktemp("duplicates") / "store", bucket="bucket",
                        output_prefix="jobs")
    app = create_app(holding_context(settings), settings, checks=[])
    key, _ = app.state.keys.create("acme", admin=True)
    return TestClient(app, headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("path, body, loc, where", [
    ("/v1/jobs", '{"model": "all-MiniLM-L6-v2", "input": ' + DOCS + ', "model": "splade-tiny"}', ["body", "model"],
     "the body"),
    ("/v1/jobs/validate", '{"input": {"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "y", "id": "c"}]}}',
     ["body", "input", "documents", 1, "id"], "body.input.documents.1"),
    ("/v1/jobs/estimate", '{"input": ' + DOCS + ', "output": {"dimensions": 8, "dtype": "float16", "dimensions": 16}}',
     ["body", "output", "dimensions"], "body.output"),
    ("/v1/schedules", '{"cron": "0 3 * * *", "input": {"uri": "s3://bucket/x/"}, "template": {"model": "a", "model": "b"}}',
     ["body", "template", "model"], "body.template"),
])
def test_a_repeated_key_is_422_naming_it(client, path, body, loc, where):
    response = client.post(path, content=body, headers=JSON)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert (error["loc"], error["type"]) == (loc, "duplicate_key")
    assert error["msg"] == f"{where} names the key {loc[-1]!r} twice; a JSON object names each key once"


def test_the_same_key_in_different_objects_is_no_repeat(client):
    body = '{"input": {"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}, "output": {"dimensions": 8}}'
    response = client.post("/v1/jobs/validate", content=body, headers=JSON)
    assert response.status_code == 200, response.text


def test_on_embeddings_it_is_openais_400_naming_the_key(client):
    response = client.post("/v1/embeddings", content='{"model": "all-MiniLM-L6-v2", "input": "a", "input": "b"}',
                           headers=JSON)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("input", "duplicate_key") and "names the key 'input' twice" in error["message"]

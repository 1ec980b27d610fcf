"""The OpenAPI contract, fuzzed by schemathesis against a live stack (`poolq dev up`: Redis,
SeaweedFS, uvicorn, a worker, beat): no 5xx, and every response matches the schema it documents
(status code, content type, body). Every operation runs generated valid requests with the dev key,
and invalid ones wherever its schema leaves anything to make invalid, and requests without any key;
then the deep paths that random ids never reach (a finished job's results, a schedule's runs) are
driven by hand through the same checks, and fuzzed too.

Checks: not_a_server_error, status_code_conformance, content_type_conformance,
response_schema_conformance everywhere; ignored_auth on valid requests, negative_data_rejection on
invalid ones. Not used: positive_data_acceptance (valid-by-schema requests are rightly refused
by what the schema cannot say: unknown models, URIs outside the tenant's area, unknown ids).
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from datetime import timedelta

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from support.dev_stack import dev_stack

pytestmark = pytest.mark.integration

CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 20  # per operation and mode
JOB_SUBMISSIONS = 12  # POST /v1/jobs: each accepted one is a real job the single worker embeds
# An operation whose only input is an id in its path answers every generated id alike (an unknown
# one: 404), so a few ids say what twenty would; and it has nothing to make invalid (_nothing_to_negate)
ID_ONLY_EXAMPLES = 5
TIMEOUT = 30  # seconds per request
# The fuzzer sends far more than 20 requests/s, many with mangled keys, all from one address: the
# stack's limits are raised so that it tests the routes, not the rate limiters
# (tests/api/server/guards/test_security.py covers 429, the failed-authentication throttle and the caps).
STACK_ENV = {"POOLQ_RATE_LIMIT_PER_S": "10000", "POOLQ_RATE_LIMIT_BURST": "100000",
             "POOLQ_AUTH_FAILURE_RATE_PER_S": "10000", "POOLQ_AUTH_FAILURE_BURST": "100000",
             "POOLQ_MAX_ACTIVE_JOBS_PER_TENANT": "1000", "POOLQ_MAX_INLINE_DOCUMENTS": "20"}
# Generation, relaxed on purpose:
# - no undeclared query parameters in negative cases: like most HTTP APIs (and FastAPI's default)
#   poolq ignores query parameters it does not know, which `negative_data_rejection` would flag;
# - the Authorization header is ours, not generated: every case carries the dev key (or, in the
#   unauthenticated test, none); missing and bad keys are covered there and in test_security.py.
CONFIG = schemathesis.Config.from_dict({"generation": {"allow-extra-parameters": False,
                                                       "with-security-parameters": False}})


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with dev_stack(tmp_path_factory.mktemp("stack"), env=STACK_ENV) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack):
    """The schema as the live API serves it, and an authenticated client; at teardown, every job
    the fuzzer created is cancelled and every schedule deleted (so neither worker nor beat grinds on)."""
    schema = schemathesis.openapi.from_url(f"{stack['api_url']}/openapi.json", timeout=TIMEOUT, config=CONFIG)
    client = httpx.Client(base_url=stack["api_url"], headers={"Authorization": f"Bearer {stack['api_key']}"},
                          timeout=TIMEOUT)
    try:
        yield schema, client
    finally:
        _clean_up(client)
        client.close()


def _clean_up(client: httpx.Client) -> None:
    for schedule in client.get("/v1/schedules").json()["schedules"]:
        client.delete(f"/v1/schedules/{schedule['id']}")
    before = None
    while True:
        page = client.get("/v1/jobs", params={"limit": 500, **({"before": before} if before else {})}).json()
        for job in page["jobs"]:
            if job["status"] in ("queued", "running"):
                client.post(f"/v1/jobs/{job['id']}/cancel")
        before = page["next_before"]
        if before is None:
            return


def _operations(schema):
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    # the spec names every route of the API (a renamed route fails here, not silently)
    assert {"POST /v1/jobs", "GET /v1/jobs", "GET /v1/jobs/{job_id}", "POST /v1/jobs/{job_id}/cancel",
            "GET /v1/jobs/{job_id}/results", "POST /v1/uploads", "GET /v1/schedules", "POST /v1/schedules",
            "GET /v1/schedules/{schedule_id}", "DELETE /v1/schedules/{schedule_id}",
            "POST /v1/schedules/{schedule_id}/run", "GET /healthz", "GET /readyz", "POST /v1/files", "GET /v1/files",
            "GET /v1/files/{file_id}", "GET /v1/files/{file_id}/content", "DELETE /v1/files/{file_id}",
            "POST /v1/batches", "GET /v1/batches", "GET /v1/batches/{batch_id}",
            "POST /v1/batches/{batch_id}/cancel", "POST /v1/embeddings"} <= labels, labels
    return operations


def _fuzz(operation, mode, *, examples: int, prepare, checks, seen: dict | None = None, **fixed) -> list[str]:
    """Run ``examples`` generated cases of ``operation`` (``fixed``: e.g. ``path_parameters`` to
    use, see ``as_strategy``); returns the failures, described. ``seen`` collects the status codes
    answered, per (operation, mode)."""
    failures: list[str] = []

    def record(ctx, response, case):
        if seen is not None:
            seen.setdefault((operation.label, mode.value), []).append(response.status_code)

    @settings(max_examples=examples, deadline=timedelta(seconds=TIMEOUT), database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(operation.as_strategy(generation_mode=mode, **fixed))
    def run(case):
        headers = prepare(case)
        try:
            case.call_and_validate(headers=headers, checks=[record, *checks], timeout=TIMEOUT)
        except FailureGroup as exc:  # collect every operation's failures, report them together
            failures.append(f"{operation.label} [{mode.value}]: {exc}")

    try:
        run()
    except Unsatisfiable:
        # Nothing to make invalid: no input but the key (POST /v1/uploads), or only a free-form string
        # in the path (GET /v1/jobs/{job_id}: every string is a valid id, unknown ones are 404).
        if mode is not schemathesis.GenerationMode.NEGATIVE:
            raise
    return failures


def _examples(operation) -> int:
    if operation.label == "POST /v1/jobs":
        return JOB_SUBMISSIONS
    return ID_ONLY_EXAMPLES if _nothing_to_negate(operation) and len(operation.path_parameters) else EXAMPLES


def _nothing_to_negate(operation) -> bool:
    """No body, no query, no header but the key, and nothing in the path but free-form strings: every
    request the schema can describe is valid, so the negative mode has no case to generate (Hypothesis
    spends over a second of draws concluding Unsatisfiable, for each of the ~18 such operations). A
    constraint added to such a parameter (a pattern, a length, a type) makes the operation fuzzed
    negatively again."""
    if len(operation.body) or len(operation.query) or any(h.name.lower() != "authorization" for h in operation.headers):
        return False
    return all(parameter.definition.get("schema", {}).get("type") == "string"
               and set(parameter.definition["schema"]) <= {"type", "title", "description"}
               for parameter in operation.path_parameters)


def _rejection(operation) -> list:
    """``negative_data_rejection``, except on a file upload: any bytes are a valid file, so a
    "file" the fuzzer made invalid (an object where the schema says string) is still a file."""
    return [] if operation.label == "POST /v1/files" else [negative_data_rejection]


def _with_key(key: str):
    def prepare(case):
        return {"Authorization": f"Bearer {key}"}
    return prepare


def _without_key(case):
    case.headers = {name: value for name, value in (case.headers or {}).items() if name.lower() != "authorization"}
    return None


def test_no_operation_answers_5xx_or_off_its_schema(stack, api):
    schema, _ = api
    failures: list[str] = []
    seen: dict[tuple[str, str], list[int]] = {}
    for operation in _operations(schema):
        failures += _fuzz(operation, schemathesis.GenerationMode.POSITIVE, examples=_examples(operation), seen=seen,
                          prepare=_with_key(stack["api_key"]), checks=[*CONFORMANCE, ignored_auth])
        if not _nothing_to_negate(operation):
            failures += _fuzz(operation, schemathesis.GenerationMode.NEGATIVE, examples=EXAMPLES, seen=seen,
                              prepare=_with_key(stack["api_key"]), checks=[*CONFORMANCE, *_rejection(operation)])
    for (label, mode), codes in sorted(seen.items()):
        print(f"{label} [{mode}]: {len(codes)} requests, {dict(sorted(Counter(codes).items()))}")
    assert not failures, "\n\n".join(failures)
    # The fuzzer got past authentication and validation: jobs were accepted, lists and ids answered.
    assert 202 in seen[("POST /v1/jobs", "positive")] and 422 in seen[("POST /v1/jobs", "negative")]
    assert 200 in seen[("GET /v1/jobs", "positive")] and 404 in seen[("GET /v1/jobs/{job_id}", "positive")]
    assert 201 in seen[("POST /v1/uploads", "positive")]
    for label in ("POST /v1/jobs", "GET /v1/jobs", "POST /v1/schedules"):  # invalid requests were sent
        assert 422 in seen[(label, "negative")], label


def test_without_a_key_every_v1_operation_is_401_on_schema(stack, api):
    schema, _ = api
    failures: list[str] = []
    answered: dict[str, set[int]] = {}

    def record_401(ctx, response, case):
        answered.setdefault(case.operation.label, set()).add(response.status_code)
        if response.status_code != 401:
            raise AssertionError(f"{case.method} {case.formatted_path}: {response.status_code} without a key")

    for operation in _operations(schema):
        if not operation.path.startswith("/v1/"):
            continue
        failures += _fuzz(operation, schemathesis.GenerationMode.POSITIVE, examples=5, prepare=_without_key,
                          checks=[*CONFORMANCE, record_401])
    assert not failures, "\n\n".join(failures)
    assert all(codes == {401} for codes in answered.values()) and len(answered) >= 11, answered


def _validated(schema, method: str, path: str, *, key: str | None, expect: int, **case_kwargs):
    """Send one hand-made case through the same checks; returns the response's JSON (or None)."""
    case = schema[path][method].Case(**case_kwargs)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    response = case.call_and_validate(headers=headers, checks=CONFORMANCE, timeout=TIMEOUT)
    assert response.status_code == expect, (method, path, response.status_code, response.text)
    return response.json() if response.content else None


def test_deep_paths_answer_on_schema(stack, api, sample_documents):
    """A real upload, job, results, cancel-after-finish, schedule, run, list page and delete."""
    schema, client = api
    key = stack["api_key"]
    upload = _validated(schema, "POST", "/v1/uploads", key=key, expect=201)
    assert upload["uri"].startswith(f"s3://{stack['bucket']}/jobs/tenants/dev/uploads/"), upload  # the caller's own area
    lines = [json.dumps({"id": d["id"], "text": d["text"]}) for d in sample_documents[:3]]
    httpx.put(upload["url"], content="\n".join(lines).encode() + b"\n", timeout=TIMEOUT).raise_for_status()
    spec = {"input": {"uri": upload["uri"]}, "long_documents": {"mode": "truncate"}}
    job = _validated(schema, "POST", "/v1/jobs", key=key, expect=202, body=spec, media_type="application/json",
                     headers={"Idempotency-Key": f"deep-{time.time_ns()}"})
    deadline = time.monotonic() + 300
    while client.get(f"/v1/jobs/{job['id']}").json()["status"] not in ("succeeded", "partially_succeeded", "failed"):
        assert time.monotonic() < deadline, "the job did not finish in 300 s"
        time.sleep(0.2)
    final = _validated(schema, "GET", "/v1/jobs/{job_id}", key=key, expect=200, path_parameters={"job_id": job["id"]})
    assert final["status"] == "succeeded", final
    results = _validated(schema, "GET", "/v1/jobs/{job_id}/results", key=key, expect=200,
                         path_parameters={"job_id": job["id"]})
    assert sum(part["rows"] for part in results["parts"]) == 3
    spec_read = _validated(schema, "GET", "/v1/jobs/{job_id}/spec", key=key, expect=200, path_parameters={"job_id": job["id"]})
    assert spec_read["input"]["uri"] == upload["uri"] and spec_read["long_documents"]["mode"] == "truncate"
    _validated(schema, "GET", "/v1/jobs/{job_id}/error-samples", key=key, expect=200, path_parameters={"job_id": job["id"]})
    _validated(schema, "POST", "/v1/jobs/{job_id}/cancel", key=key, expect=409, path_parameters={"job_id": job["id"]})
    _validated(schema, "GET", "/v1/jobs", key=key, expect=200, query={"limit": 1})
    # a schedule over the upload: created, shown, run by hand (a second job), shown with its run, deleted
    body = {"cron": "0 3 1 1 *", "input": {"uri": upload["uri"]}, "template": {"long_documents": {"mode": "truncate"}}}
    schedule = _validated(schema, "POST", "/v1/schedules", key=key, expect=201, body=body, media_type="application/json")
    sid = {"schedule_id": schedule["id"]}
    _validated(schema, "GET", "/v1/schedules/{schedule_id}", key=key, expect=200, path_parameters=sid)
    run = _validated(schema, "POST", "/v1/schedules/{schedule_id}/run", key=key, expect=202, path_parameters=sid)
    assert run["job_id"] and run["manual"]
    detail = _validated(schema, "GET", "/v1/schedules/{schedule_id}", key=key, expect=200, path_parameters=sid)
    assert [r["job_id"] for r in detail["runs"]] == [run["job_id"]]
    # generated requests against these real objects (the fuzz above only ever met unknown ids)
    failures: list[str] = []
    seen: dict[tuple[str, str], list[int]] = {}
    for method, path, ids in (("GET", "/v1/jobs/{job_id}", {"job_id": job["id"]}),
                              ("GET", "/v1/jobs/{job_id}/results", {"job_id": job["id"]}),
                              ("POST", "/v1/jobs/{job_id}/cancel", {"job_id": job["id"]}),
                              ("GET", "/v1/schedules/{schedule_id}", sid),
                              ("POST", "/v1/schedules/{schedule_id}/run", sid)):
        failures += _fuzz(schema[path][method], schemathesis.GenerationMode.POSITIVE, examples=5, seen=seen,
                          prepare=_with_key(key), checks=CONFORMANCE, path_parameters=ids)
    assert not failures, "\n\n".join(failures)
    assert {label: set(codes) for (label, _), codes in seen.items()} == {
        "GET /v1/jobs/{job_id}": {200}, "GET /v1/jobs/{job_id}/results": {200}, "POST /v1/jobs/{job_id}/cancel": {409},
        "GET /v1/schedules/{schedule_id}": {200}, "POST /v1/schedules/{schedule_id}/run": {202}}
    _validated(schema, "GET", "/v1/schedules", key=key, expect=200)
    _validated(schema, "DELETE", "/v1/schedules/{schedule_id}", key=key, expect=204, path_parameters=sid)
    _validated(schema, "GET", "/v1/schedules/{schedule_id}", key=key, expect=404, path_parameters=sid)
    # the errors every authenticated route documents
    _validated(schema, "GET", "/v1/jobs/{job_id}", key=None, expect=401, path_parameters={"job_id": job["id"]})
    _validated(schema, "GET", "/v1/jobs/{job_id}", key=key, expect=404, path_parameters={"job_id": "0" * 32})
    _validated(schema, "POST", "/v1/jobs", key=key, expect=422, body={"input": {"uri": "s3://other-bucket/x.jsonl"}},
               media_type="application/json")
    _validated(schema, "GET", "/readyz", key=None, expect=200)


def test_the_dev_key_never_reaches_the_stacks_logs(stack, api):
    """After everything above (requests with the key, without it, with generated ones)."""
    secret = stack["api_key"].split("_", 2)[2]  # pq_<key_id>_<secret>; the secret may contain "_"
    assert len(secret) == 43
    logs = sorted((p for p in os.scandir(os.path.join(stack["dir"], "logs")) if p.is_file()), key=lambda p: p.name)
    assert {p.name for p in logs} >= {"api.log", "worker.log"}
    for entry in logs:
        with open(entry.path, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
        assert stack["api_key"] not in text and secret not in text, entry.name

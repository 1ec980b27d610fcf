"""The client answers with the server's own response models (the classes its routes declare, not
copies), read by attribute; reading one as the JSON dict it used to be still works, with a warning."""
import json
from datetime import datetime

import httpx
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from support.api_client import InProcessTransport, authed_client

from poolq.api.client.poolq_client import PoolqClient
from poolq.api.server.routes import estimates, jobs, schedules, sinks, uploads
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobCounts, JobStatus
from poolq.products import RunView, Schedule

DOCS = [{"id": f"doc-{i}", "text": f"document number {i} talks about topic {i % 3}"} for i in range(6)]


class _Recording(httpx.BaseTransport):
    """Forwards to the in-process app and keeps each answer's JSON: what the client parsed."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.bodies = inner, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.bodies.append(json.loads(response.content) if response.content else None)
        return response


@pytest.fixture
def app_client(local_ctx):
    return authed_client(local_ctx)


@pytest.fixture
def recording(app_client):
    return _Recording(InProcessTransport(TestClient(app_client.app)))


@pytest.fixture
def poolq(app_client, recording):
    with PoolqClient("http://testserver", app_client.api_key, transport=recording) as client:
        yield client


@pytest.fixture
def prefix(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "part-1.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS[:3]))
    return (tmp_path / "docs").as_uri() + "/"


ROUTES = [route for module in (jobs, estimates, schedules, sinks, uploads) for route in module.router.routes]


def _declared(method: str, path: str) -> type:
    """The response model the API's route for ``method path`` declares."""
    [route] = [r for r in ROUTES if isinstance(r, APIRoute) and r.path == path and method in r.methods]
    return route.response_model


def test_every_job_method_answers_with_its_routes_response_model(poolq):
    submitted = poolq.submit({"input": {"documents": DOCS}})
    seen = []
    final = poolq.wait(submitted.id, poll_interval=0.01, timeout=30, on_progress=seen.append)
    answers = {
        ("POST", "/v1/jobs"): submitted,
        ("POST", "/v1/jobs/validate"): poolq.validate({"input": {"documents": DOCS}}),
        ("GET", "/v1/jobs/{job_id}"): poolq.get(submitted.id),
        ("GET", "/v1/jobs"): poolq.jobs(limit=5),
        ("GET", "/v1/jobs/{job_id}/results"): poolq.results(submitted.id),
        ("POST", "/v1/jobs/estimate"): poolq.estimate({"input": {"documents": DOCS}}),
    }
    assert {key: type(answer) for key, answer in answers.items()} == {key: _declared(*key) for key in answers}
    assert type(final) is JobStatus and all(type(job) is JobStatus for job in seen) and seen[-1] == final
    # typed all the way down: states, times, counts, nested models
    assert final.status is JobState.SUCCEEDED and isinstance(final.created_at, datetime)
    assert final.counts == JobCounts(total=6, completed=6, failed=0) and final.usage.tokens > 0
    page, results = answers[("GET", "/v1/jobs")], answers[("GET", "/v1/jobs/{job_id}/results")]
    assert [job.id for job in page.jobs] == [submitted.id] and type(page.jobs[0]) is JobStatus
    assert results.counts.completed == 6 and sum(part.rows for part in results.parts) == 6
    assert results.usage.tokens == final.usage.tokens and answers[("POST", "/v1/jobs/validate")].valid is True


def test_schedule_methods_answer_with_their_routes_response_models(poolq, prefix):
    created = poolq.create_schedule({"cron": "*/5 * * * *", "input": {"uri": prefix}})
    run = poolq.run_schedule(created.id)
    detail = poolq.get_schedule(created.id)
    assert type(created) is _declared("POST", "/v1/schedules") is Schedule
    assert type(run) is _declared("POST", "/v1/schedules/{schedule_id}/run") is RunView
    assert type(detail) is _declared("GET", "/v1/schedules/{schedule_id}")
    # list_schedules: the list the route's ScheduleList holds, each a Schedule
    listed = poolq.list_schedules()
    assert _declared("GET", "/v1/schedules").model_fields["schedules"].annotation == list[Schedule]
    assert [type(s) for s in listed] == [Schedule] and listed[0].id == created.id and listed[0].cron == "*/5 * * * *"
    assert run.status is JobState.SUCCEEDED and run.manual and isinstance(run.slot, datetime)
    assert [(r.job_id, r.status) for r in detail.runs] == [(run.job_id, JobState.SUCCEEDED)] and type(detail.runs[0]) is RunView


def test_sink_retry_and_upload_tickets_are_their_routes_models(monkeypatch):
    """A local store presigns no uploads and the in-process sinks never fail: the answers come from a stub."""
    from poolq.api.server.routes.sinks import SinkRetry
    from poolq.api.server.routes.uploads import Upload

    answers = {"/v1/jobs/j1/sinks/retry": {"job_id": "j1", "retried": ["search"]},
               "/v1/uploads": {"upload_id": "u1", "uri": "s3://b/u1.jsonl", "url": "https://store/u1?sig", "expires_in_s": 60}}
    stub = httpx.MockTransport(lambda request: httpx.Response(202, json=answers[request.url.path]))
    puts = []
    with PoolqClient("http://testserver", "key", transport=stub) as client:
        monkeypatch.setattr(client, "_files", httpx.Client(transport=httpx.MockTransport(
            lambda request: puts.append((request.method, str(request.url), request.content)) or httpx.Response(200))))
        retried, ticket = client.retry_sinks("j1"), client.new_upload()
        assert type(retried) is SinkRetry is _declared("POST", "/v1/jobs/{job_id}/sinks/retry")
        assert type(ticket) is Upload is _declared("POST", "/v1/uploads")
        assert retried.retried == ["search"] and (ticket.uri, ticket.method) == ("s3://b/u1.jsonl", "PUT")
        client.put_upload(ticket, b"a")
        client.put_upload(dict(answers["/v1/uploads"]), b"b")  # a ticket as its JSON dict, as before: still taken
    assert puts == [("PUT", "https://store/u1?sig", b"a"), ("PUT", "https://store/u1?sig", b"b")]


def test_dict_access_warns_naming_the_attribute_and_answers_what_the_json_held(poolq, recording, prefix):
    def with_json(answer):  # the answer, and the JSON it was read from (the last one the client got)
        return answer, recording.bodies[-1]

    job, job_json = with_json(poolq.wait(poolq.submit({"input": {"documents": DOCS}}).id, poll_interval=0.01, timeout=30))
    answers = [(job, job_json), with_json(poolq.jobs()), with_json(poolq.results(job.id)),
               with_json(poolq.create_schedule({"cron": "0 3 * * *", "input": {"uri": prefix}}))]
    for answer, body in answers:
        name = type(answer).__name__
        for key, value in body.items():
            with pytest.warns(DeprecationWarning, match=rf"read {name}\.{key} "):
                assert answer[key] == value, (name, key)
    with pytest.warns(DeprecationWarning, match=r"read JobStatus\.usage"):
        assert job["usage"]["tokens"] == job.usage.tokens > 0  # nested values are the JSON's dicts
    with pytest.warns(DeprecationWarning, match=r"read JobStatus\.created_at"):
        assert job.get("created_at") == job_json["created_at"] and isinstance(job_json["created_at"], str)
    with pytest.warns(DeprecationWarning, match=r"read JobStatus\.status"):
        assert job["status"] == "succeeded" and type(job["status"]) is str
    with pytest.warns(DeprecationWarning, match=r"JobStatus has no field 'nope'"):
        assert job.get("nope", 7) == 7 and "nope" not in job
    with pytest.warns(DeprecationWarning, match=r"read JobStatus\.error"):
        assert "error" in job and job["error"] is None  # a field that is None is in the JSON, as null
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
        job["nope"]


def test_an_answer_from_a_newer_server_with_fields_this_client_does_not_know_still_reads():
    """Request models refuse unknown fields (a typo is a 422); the client reads answers leniently, so a
    server that adds a field (to a schedule, or inside its template) breaks no older client."""
    from poolq.api.client.poolq_client import PoolqProtocolError

    stored = Schedule.model_validate({"id": "s1", "tenant": "t", "created_at": "2026-12-05T00:00:00Z",
                                      "cron": "0 * * * *", "input": {"uri": "s3://bucket/corpus/"}})
    newer = stored.model_dump(mode="json")
    newer["paused_until"] = None
    newer["template"]["output"]["added_option"] = 1
    answers = {"/v1/schedules": newer, "/v1/jobs": {"unexpected": "shape"}}
    stub = httpx.MockTransport(lambda request: httpx.Response(201, json=answers[request.url.path]))
    with PoolqClient("http://testserver", "key", transport=stub) as client:
        assert client.create_schedule({"cron": "0 * * * *"}) == stored
        # A body missing what the model needs is still not poolq's answer
        with pytest.raises(PoolqProtocolError, match="POST http://testserver/v1/jobs answered something"):
            client.submit({"input": {"documents": []}})

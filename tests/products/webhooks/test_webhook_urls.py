"""Webhook URLs are normalised before the allow-list matches them and sent as matched; what cannot
be sent is refused at submit (422 on ``webhook.url``); a delivery that cannot be made is failed at
once, on the status, never left pending or retried as if it might pass."""
import http.client
import ipaddress
import time

import pytest
from support.job_doubles import RecordingEnqueuer, drain
from support.webhook_receiver import receiving

from poolq.jobs.job_handle import JobHandle
from poolq.jobs.ledger.webhook_records import JOB_ENDED, WebhookRecords
from poolq.jobs.settings import Settings
from poolq.jobs.spec.job_spec import JobSpec
from poolq.jobs.spec.webhook import WebhookEvent
from poolq.jobs.status.current_status import current_status
from poolq.jobs.steps.submit import JobRejected, submit_job
from poolq.products.webhooks.allow_list import AllowList
from poolq.products.webhooks.delivery import attempt_delivery, deliver_event
from poolq.products.webhooks.sender import InMemorySender
from poolq.products.webhooks.webhook_url import WebhookRefused, parse_webhook_url
from poolq.worker.local_runner import local_context

TENANT = "acme"
HOOKS = "https://api.example.net/hooks"
UNSENDABLE = ["/hooks/caf\u00e9", "/hooks/a b", "/hooks/a\nb", "/hooks/a\tb", "/hooks/x?q=a b", "/hooks/%zz"]


def _matched_path(url: str, allow: str = HOOKS) -> str:
    parsed, _ = AllowList.parse(allow).entry_for(url)
    return parsed.path


@pytest.mark.parametrize("path", ["/hooks/../admin", "/hooks/%2e%2e/admin", "/hooks/%2E%2E/admin", "/hooks/.%2e/admin",
                                  "/hooks/./../admin", "/hooks/a/../../admin"])
def test_dot_segments_are_removed_before_the_allow_list_matches(path):
    with pytest.raises(WebhookRefused, match="not in the server's webhook allow-list"):
        AllowList.parse(HOOKS).entry_for("https://api.example.net" + path)


@pytest.mark.parametrize(("path", "sent"), [
    ("/hooks/a/../b", "/hooks/b"), ("/hooks/%2e/b", "/hooks/b"), ("/h%6Foks/%7Euser", "/hooks/~user"),
    ("/hooks/caf%c3%a9?q=%2e", "/hooks/caf%C3%A9?q=%2e"), ("/hooks/a/..", "/hooks/"),
])
def test_what_is_matched_is_the_normalised_path(path, sent):
    assert _matched_path("https://api.example.net" + path) == sent


@pytest.mark.parametrize(("path", "why"), [
    ("/hooks/a%2fb", "encoded '/'"), ("/hooks/a%2Fb", "encoded '/'"), ("/hooks/a%5cb", r"encoded '\\'"),
    ("/../hooks", "climbs above its root"), ("/hooks/../../hooks", "climbs above its root"),
    ("/hooks/..;/admin", "read it as '..'"),
])
def test_encoded_slashes_and_escaping_dot_segments_are_refused(path, why):
    with pytest.raises(WebhookRefused, match=why):
        parse_webhook_url("https://api.example.net" + path)


@pytest.mark.parametrize("path", UNSENDABLE)
def test_what_no_request_can_carry_is_refused_saying_where(path):
    with pytest.raises(WebhookRefused, match=r"cannot be sent in a URL: percent-encode it|'%' not followed"):
        parse_webhook_url("https://api.example.net" + path)


@pytest.fixture
def receiver():
    with receiving() as receiver:
        yield receiver


def _context(tmp_path, engine, receiver):
    ctx = local_context(tmp_path / "out", Settings(shard_max_documents=4, webhook_allow=f"http://127.0.0.1:{receiver.port}"))
    ctx.engines.use("all-MiniLM-L6-v2", engine)
    ctx.enqueuer = RecordingEnqueuer()
    return ctx


def _spec(url: str) -> JobSpec:
    documents = [{"id": f"d{i}", "text": f"document number {i} about webhook URLs"} for i in range(3)]
    return JobSpec.model_validate({"input": {"documents": documents}, "webhook": {"url": url}})


@pytest.mark.parametrize("path", [*UNSENDABLE, "/hook%2fadmin", "/../hook"])
def test_a_url_that_cannot_be_sent_is_refused_at_submit_naming_the_field(tmp_path, minilm_engine, receiver, path):
    ctx = _context(tmp_path, minilm_engine, receiver)
    with pytest.raises(JobRejected) as refused:
        submit_job(ctx, _spec(receiver.url(path)), tenant=TENANT)
    assert refused.value.field == "webhook.url" and "webhook URL refused" in str(refused.value)
    assert ctx.enqueuer.tasks == []


def test_the_normalised_url_is_the_one_sent(tmp_path, minilm_engine, receiver):
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = submit_job(ctx, _spec(receiver.url("/hook/a/../%62")), tenant=TENANT).id
    drain(ctx, only=frozenset({"plan", "plan_section", "shard", "finalize"}))
    assert deliver_event(ctx, job_id, JOB_ENDED) is None
    assert [request.path for request in receiver.requests] == ["/hook/b"]


@pytest.mark.parametrize("path", ["/hook/caf\u00e9", "/hook/a b"])
def test_an_event_queued_with_an_unsendable_url_fails_at_once_on_the_status(tmp_path, minilm_engine, receiver, path):
    """An event written before these checks (or by a poolq without them): failed, with its error
    and attempt, not pending for ever nor retried for a day."""
    ctx = _context(tmp_path, minilm_engine, receiver)
    job_id = submit_job(ctx, _spec(receiver.url()), tenant=TENANT).id
    drain(ctx, only=frozenset({"plan", "plan_section", "shard"}))
    job = JobHandle.bind(ctx, job_id)
    event = WebhookEvent(id="msg_old", type="job.succeeded", created_at=time.time(), url=receiver.url(path),
                         payload={"type": "job.succeeded", "data": {}})
    WebhookRecords(ctx.store, job.layout).put_event(JOB_ENDED, event)
    drain(ctx, only=frozenset({"finalize"}))
    assert deliver_event(ctx, job_id, JOB_ENDED, attempt=0) is None  # no retry
    webhook = current_status(job).webhook
    assert (webhook.state, webhook.attempts, webhook.last_status) == ("failed", 1, None)
    assert webhook.error.startswith("refused: ") and "cannot be sent in a URL" in webhook.error
    assert receiver.requests == []


class _Raising(InMemorySender):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def post(self, url, address, headers, body):
        raise self.exc


@pytest.mark.parametrize(("exc", "final", "said"), [
    (http.client.InvalidURL("URL can't contain control characters"), True, "cannot be sent: InvalidURL"),
    (UnicodeEncodeError("ascii", "\u00e9", 0, 1, "ordinal not in range"), True, "cannot be sent: UnicodeEncodeError"),
    (ValueError("a header value the sender refuses"), True, "cannot be sent: ValueError"),
    (TimeoutError("timed out"), False, "no answer: TimeoutError"),
    (ConnectionRefusedError("refused"), False, "no answer: ConnectionRefusedError"),
    (http.client.RemoteDisconnected("closed"), False, "no answer: RemoteDisconnected"),
])
def test_each_failure_to_send_is_classified_once_an_invalid_request_is_final(exc, final, said):
    event = WebhookEvent(id="msg_1", type="job.succeeded", created_at=0.0, url="http://10.0.0.7/in", payload={})
    made = attempt_delivery(event, ["whsec_" + "A" * 43 + "="], AllowList.parse("http://10.0.0.7"), _Raising(exc),
                            now=1.0, resolver=lambda host, port: [ipaddress.ip_address("10.0.0.7")])
    assert (made.final, made.status) == (final, None) and made.error.startswith(said)


"""The senders' contract, over the real HTTP sender (against a loopback receiver) and the in-process one:
each POST gets its answer's status, a redirect comes back as the answer (with its target), never followed."""
import ipaddress

import pytest
from support.webhook_receiver import Receiver, serve

from poolq.jobs.webhooks.sender import HttpSender, InMemorySender
from poolq.jobs.webhooks.webhook_url import parse_webhook_url

STATUSES = [500, 302, 200]


@pytest.fixture(params=["http", "in_memory"])
def sender_and_requests(request):
    if request.param == "in_memory":
        sender = InMemorySender(statuses=list(STATUSES))
        yield sender, "http://127.0.0.1:9/hook", lambda: [r[0].path for r in sender.requests]
        return
    receiver = Receiver(statuses=list(STATUSES))
    server = serve(receiver)
    yield HttpSender(1.0, 2.0, 1024), receiver.url(), lambda: [r.path for r in receiver.requests]
    server.shutdown()
    server.server_close()


def test_each_post_gets_its_answer_and_a_redirect_is_not_followed(sender_and_requests):
    sender, url, paths = sender_and_requests
    target = parse_webhook_url(url)
    answers = [sender.post(target, ipaddress.ip_address("127.0.0.1"), {"webhook-id": "msg_1"}, b"{}")
               for _ in STATUSES]
    assert [answer.status for answer in answers] == STATUSES
    assert answers[1].location is not None and answers[0].location is None
    assert paths() == ["/hook"] * 3  # three requests, all to the URL's path: the redirect was not followed


def test_the_real_sender_connects_to_the_pinned_address_not_the_name(closed_port):
    receiver = Receiver()
    server = serve(receiver)
    try:
        # the name resolves nowhere: only the pinned address is used, with the name in Host
        target = parse_webhook_url(f"http://hooks.invalid:{receiver.port}/hook")
        answer = HttpSender(1.0, 2.0, 1024).post(target, ipaddress.ip_address("127.0.0.1"), {}, b"{}")
        assert answer.status == 200 and receiver.requests[0].headers["host"] == f"hooks.invalid:{receiver.port}"
        with pytest.raises(ConnectionRefusedError):
            HttpSender(1.0, 2.0, 1024).post(parse_webhook_url(f"http://127.0.0.1:{closed_port}/"),
                                            ipaddress.ip_address("127.0.0.1"), {}, b"{}")
    finally:
        server.shutdown()
        server.server_close()

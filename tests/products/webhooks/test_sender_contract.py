"""The senders' contract, over the real HTTP sender (against a loopback receiver) and the in-process one:
each POST gets its answer's status, a redirect comes back as the answer (with its target), never followed."""
import ipaddress

import pytest
from support.webhook_receiver import Receiver, serve

from poolq.products.webhooks.sender import HttpSender, InMemorySender
from poolq.products.webhooks.webhook_url import parse_webhook_url

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


def _certificates(tmp_path):
    """A CA and a certificate it signed for hooks.test: PEM files (the server's) and the CA's path."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(name, key, issuer, issuer_key, ca):
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "poolq test CA")])
    ca = certificate("poolq test CA", ca_key, ca_name, ca_key, ca=True)
    leaf = certificate("hooks.test", leaf_key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()))
    return tmp_path / "ca.pem"


def test_https_goes_to_the_pinned_address_and_checks_the_certificate_against_the_name(tmp_path):
    import ssl

    ca = _certificates(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    receiver = Receiver()
    server = serve(receiver, server_tls)
    try:
        sender = HttpSender(1.0, 2.0, 1024, tls=ssl.create_default_context(cafile=str(ca)))
        loopback = ipaddress.ip_address("127.0.0.1")
        answer = sender.post(parse_webhook_url(f"https://hooks.test:{receiver.port}/hook"), loopback, {}, b"{}")
        assert answer.status == 200 and receiver.requests[0].headers["host"] == f"hooks.test:{receiver.port}"
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):  # same address, a name the certificate lacks
            sender.post(parse_webhook_url(f"https://other.test:{receiver.port}/hook"), loopback, {}, b"{}")
        with pytest.raises(ssl.SSLCertVerificationError):  # the system's CAs do not trust the test CA
            HttpSender(1.0, 2.0, 1024).post(parse_webhook_url(f"https://hooks.test:{receiver.port}/hook"), loopback,
                                            {}, b"{}")
        assert len(receiver.requests) == 1
    finally:
        server.shutdown()
        server.server_close()

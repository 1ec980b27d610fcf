"""Signing as the Standard Webhooks spec says: its published test vector, and the reference
library (``standardwebhooks``) verifying what poolq signs."""
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from poolq.products.webhooks.signing import SECRET_PREFIX, new_secret, secret_key, sign, signed_headers, verify

# The spec's example (and its reference libraries' test): secret, id, timestamp, body, signature.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_spec_test_vector_signs_as_published():
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_the_reference_library_verifies_what_poolq_signs_and_refuses_a_changed_body():
    secret, now = new_secret(), int(time.time())
    body = b'{"type":"job.succeeded","data":{"job_id":"x"}}'
    headers = signed_headers([secret], "msg_1", now, body)
    assert Webhook(secret).verify(body, headers) == {"type": "job.succeeded", "data": {"job_id": "x"}}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"x", b"y"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_while_two_secrets_sign_a_receiver_holding_either_verifies():
    old, new, now = new_secret(), new_secret(), int(time.time())
    headers = signed_headers([new, old], "msg_2", now, b"{}")
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(b"{}", headers) == {} and Webhook(new).verify(b"{}", headers) == {}


def test_verify_refuses_a_stale_timestamp_and_a_foreign_signature():
    secret = new_secret()
    headers = signed_headers([secret], "msg_3", 1_000_000, b"{}")
    assert verify(secret, headers, b"{}", now=1_000_000 + 299)
    assert not verify(secret, headers, b"{}", now=1_000_000 + 301)
    assert not verify(new_secret(), headers, b"{}", now=1_000_000)


def test_a_new_secret_is_whsec_and_32_random_bytes():
    first, second = new_secret(), new_secret()
    assert first.startswith(SECRET_PREFIX) and len(secret_key(first)) == 32 and first != second
    with pytest.raises(ValueError, match="base64"):
        secret_key("whsec_not base64!")

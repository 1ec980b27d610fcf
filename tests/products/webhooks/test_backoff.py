"""The back-off schedule: doubling from the base, capped, and ending at the retry window."""
from poolq.products.webhooks.backoff import backoff_s, next_attempt_in


def test_waits_double_from_the_base_up_to_the_cap():
    assert [backoff_s(n, 5.0, 900.0) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 320, 640, 900]


def test_no_attempt_is_scheduled_past_the_retry_window():
    assert next_attempt_in(1, 0.0, 5.0, 900.0, 60.0) == 5.0
    assert next_attempt_in(4, 20.0, 5.0, 900.0, 60.0) == 40.0  # due at 60 s: still inside
    assert next_attempt_in(4, 21.0, 5.0, 900.0, 60.0) is None
    # 24 h at the defaults: about 100 attempts, the last waits 15 minutes
    elapsed, attempts = 0.0, 0
    while (wait := next_attempt_in(attempts + 1, elapsed, 5.0, 900.0, 86400.0)) is not None:
        elapsed, attempts = elapsed + wait, attempts + 1
    assert 90 < attempts < 110 and elapsed <= 86400

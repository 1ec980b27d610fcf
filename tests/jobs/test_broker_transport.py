"""The worker's broker transport survives the restore kombu attempts while the broker is down."""
import logging

import pytest
import redis.exceptions
from kombu.transport import redis as kombu_redis

from poolq.jobs.settings import Settings
from poolq.jobs.worker.broker_transport import QoS, Transport
from poolq.jobs.worker.celery_app import create_celery_app


def test_every_poolq_celery_app_uses_it():
    connection = create_celery_app(Settings()).connection_for_read()
    assert isinstance(connection.transport, Transport) and connection.transport.Channel.QoS is QoS


@pytest.mark.parametrize("failure", [
    AttributeError("'NoneType' object has no attribute 'hostname'"),  # kombu 5.x, connection released
    redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
])
def test_a_restore_that_fails_because_the_broker_is_gone_is_skipped_with_a_warning(monkeypatch, caplog, failure):
    def broken(self, client=None):
        raise failure

    monkeypatch.setattr(kombu_redis.QoS, "restore_unacked_once", broken)
    qos = QoS.__new__(QoS)  # no channel needed: the parent's restore is what fails
    with caplog.at_level(logging.WARNING):
        assert qos.restore_unacked_once() is None
    assert "stay in Redis until its visibility timeout" in caplog.text


def test_other_errors_are_not_hidden(monkeypatch):
    def broken(self, client=None):
        raise ValueError("a real bug")

    monkeypatch.setattr(kombu_redis.QoS, "restore_unacked_once", broken)
    with pytest.raises(ValueError):
        QoS.__new__(QoS).restore_unacked_once()


def _delivered_on_a_channel(redis_url: str, queue: str):
    """A message sent to ``queue`` and delivered (not yet acked) on a channel of a real Redis broker."""
    import uuid

    from kombu import Connection

    settings = Settings(redis_url=redis_url)
    connection = create_celery_app(settings).connection_for_read()
    channel = connection.default_channel
    channel.queue_declare(queue)
    body = f"unit-{uuid.uuid4().hex}"
    with Connection(redis_url) as producer_connection:
        producer_connection.SimpleQueue(queue).put(body)
    message = channel.basic_get(queue, no_ack=False)
    assert message is not None
    return connection, channel, message


@pytest.mark.integration
@pytest.mark.parametrize("settle", ["ack", "reject"])
def test_a_settlement_left_pending_on_a_channel_closed_by_a_lost_connection_is_skipped(redis_url, caplog, settle):
    # Given a message delivered on a channel that was closed when the connection was lost (the
    # worker's event loop still holds its ack, or its reject after a retry that could not be sent)
    connection, channel, message = _delivered_on_a_channel(redis_url, f"closed-{settle}")
    unacked_key = channel.qos.unacked_key
    channel.qos.restore_at_shutdown = False  # as when the broker was down at close: the restore is skipped
    channel.close()
    # When it is settled after the consumer reconnected
    with caplog.at_level(logging.WARNING):
        getattr(message, settle)()
    # Then nothing is raised (Celery would stop the worker), the warning says why, and the message
    # is still unacked in Redis, for the visibility-timeout sweep to deliver it again
    assert f"{settle} of message {message.delivery_tag} skipped" in caplog.text
    client = redis.Redis.from_url(redis_url)
    assert client.hexists(unacked_key, message.delivery_tag)
    connection.release()


@pytest.mark.integration
def test_a_settlement_on_an_open_channel_still_reaches_redis(redis_url):
    connection, channel, message = _delivered_on_a_channel(redis_url, "open-ack")
    message.ack()
    assert not redis.Redis.from_url(redis_url).hexists(channel.qos.unacked_key, message.delivery_tag)
    connection.release()

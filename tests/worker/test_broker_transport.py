"""The worker's broker transport survives the restore kombu attempts while the broker is down."""
import logging

import pytest
import redis.exceptions
from kombu.transport import redis as kombu_redis

from poolq.jobs.settings import Settings
from poolq.worker.broker_transport import QoS, Transport
from poolq.worker.celery_app import create_celery_app


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


def _closed_with_its_messages_unacked(redis_url: str, queue: str):
    """A message delivered on a channel that was then closed by a lost connection: kombu released
    its connection, and the restore at close was skipped (the broker was down), so the message is
    still in Redis' unacked hash. The worker's event loop may still hold its ack or reject."""
    connection, channel, message = _delivered_on_a_channel(redis_url, queue)
    channel.qos.restore_at_shutdown = False  # as when the broker was down at close
    channel.close()
    assert channel.connection is None
    assert redis.Redis.from_url(redis_url).hexists(channel.qos.unacked_key, message.delivery_tag)
    return connection, channel, message


@pytest.mark.integration
@pytest.mark.parametrize("settle", ["ack", "reject"])
def test_a_settlement_left_pending_on_a_channel_closed_by_a_lost_connection_still_reaches_redis(redis_url, settle):
    # Given a message of a channel closed by a lost connection, its ack or reject still pending
    connection, channel, message = _closed_with_its_messages_unacked(redis_url, f"closed-{settle}")
    # When the broker answers again and the event loop runs the settlement
    getattr(message, settle)()
    # Then it reaches Redis as it would have on the open channel (before, kombu raised
    # AttributeError building a client for the closed channel, and Celery stopped the worker)
    client = redis.Redis.from_url(redis_url)
    assert not client.hexists(channel.qos.unacked_key, message.delivery_tag)
    assert client.llen(f"closed-{settle}") == 0  # settled, not put back
    assert channel._pool is None  # the pool it settled on is closed again
    connection.release()


@pytest.mark.integration
def test_a_requeue_left_pending_on_a_closed_channel_leaves_the_message_unacked(redis_url, caplog):
    # kombu would need the released connection's exchange table to put it back; it would log
    # "Could not restore message" and still drop it from the unacked hash: a lost message
    connection, channel, message = _closed_with_its_messages_unacked(redis_url, "closed-requeue")
    with caplog.at_level(logging.WARNING):
        message.reject(requeue=True)
    assert f"requeue of message {message.delivery_tag} skipped" in caplog.text
    assert redis.Redis.from_url(redis_url).hexists(channel.qos.unacked_key, message.delivery_tag)
    connection.release()


@pytest.mark.integration
@pytest.mark.parametrize("settle", ["ack", "reject"])
def test_a_settlement_on_a_closed_channel_while_the_broker_is_down_again_is_skipped(redis_url, caplog, settle, closed_port):
    # Given a message of a closed channel, and a broker that is unreachable again
    connection, channel, message = _closed_with_its_messages_unacked(redis_url, f"down-{settle}")
    channel._server_params = {**channel._server_params, "port": closed_port}  # nothing listens there
    # When the settlement runs
    with caplog.at_level(logging.WARNING):
        getattr(message, settle)()
    # Then nothing is raised, the warning says why, and the message is still unacked in Redis, for
    # the visibility-timeout sweep to deliver it again
    assert f"{settle} of message {message.delivery_tag} skipped" in caplog.text
    assert redis.Redis.from_url(redis_url).hexists(channel.qos.unacked_key, message.delivery_tag)
    connection.release()


@pytest.mark.integration
def test_a_settlement_on_an_open_channel_still_reaches_redis(redis_url):
    connection, channel, message = _delivered_on_a_channel(redis_url, "open-ack")
    message.ack()
    assert not redis.Redis.from_url(redis_url).hexists(channel.qos.unacked_key, message.delivery_tag)
    connection.release()

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

"""kombu's Redis transport, with one failure path made survivable.

When a worker loses its broker connection, kombu closes the channel and restores its unacked
messages at once; with the connection already gone that restore raises (kombu 5.x: an
``AttributeError`` on the released connection's ``conninfo``, or a Redis connection error) and
Celery stops the worker as "unrecoverable". Skipping that one restore loses nothing: the
messages stay in Redis' unacked hash, and the transport's visibility-timeout sweep (or the
reconciler, for poolq's units) brings them back once the broker answers again.
"""
from __future__ import annotations

import logging

import redis.exceptions
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)


class QoS(kombu_redis.QoS):
    def restore_unacked_once(self, client=None):
        try:
            return super().restore_unacked_once(client)
        except (AttributeError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            log.warning("unacked messages not restored while the broker is unreachable (%s: %s); "
                        "they stay in Redis until its visibility timeout", type(exc).__name__, exc)
            return None


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel

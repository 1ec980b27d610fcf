"""kombu's Redis transport, with two failure paths of a lost broker connection made survivable.

1. When a worker loses its broker connection, kombu closes the channel and restores its unacked
   messages at once; with the connection already gone that restore raises (kombu 5.x: an
   ``AttributeError`` on the released connection's ``conninfo``, or a Redis connection error) and
   Celery stops the worker as "unrecoverable".
2. An ack or reject of a message delivered on that channel can still be pending in the worker's
   event loop (a task that finished, or whose retry could not be sent, while the broker was
   down). It runs after the consumer reconnected, on the closed channel, whose ``connection`` is
   None, and kombu raises ``AttributeError`` building a client for it: Celery again stops the
   worker as "unrecoverable" (seen in the outage chaos test).

Skipping that restore, or that settlement, loses nothing: the messages stay in Redis' unacked
hash, and the transport's visibility-timeout sweep (or the reconciler, for poolq's units) brings
them back once the broker answers again. A message whose ack was skipped is delivered again;
poolq's units are idempotent (the ledger's commit markers), so it is done once.
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

    def ack(self, delivery_tag):
        if self._channel_closed("ack", delivery_tag):
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if self._channel_closed("reject", delivery_tag):
            return
        super().reject(delivery_tag, requeue=requeue)

    def _channel_closed(self, settlement: str, delivery_tag) -> bool:
        """True (and a warning) when the message's channel was closed: kombu releases a closed
        channel's connection, and settling on it would raise instead of reaching Redis."""
        if self.channel.connection is not None:
            return False
        self._delivered.pop(delivery_tag, None)  # this channel's bookkeeping only; Redis keeps it unacked
        log.warning("%s of message %s skipped: its broker channel was closed when the connection was lost; "
                    "it stays in Redis until its visibility timeout and is delivered again", settlement, delivery_tag)
        return True


class Channel(kombu_redis.Channel):
    QoS = QoS


class Transport(kombu_redis.Transport):
    Channel = Channel

"""kombu's Redis transport, with two failure paths of a lost broker connection made survivable.

1. When a worker loses its broker connection, kombu closes the channel and restores its unacked
   messages at once; with the connection already gone that restore raises (kombu 5.x: an
   ``AttributeError`` on the released connection's ``conninfo``, or a Redis connection error) and
   Celery stops the worker as "unrecoverable". Skipping that one restore loses nothing: the
   messages stay in Redis' unacked hash, and the transport's visibility-timeout sweep (or the
   reconciler, for poolq's units) brings them back once the broker answers again.
2. An ack or reject of a message delivered on that channel can still be pending in the worker's
   event loop (a task that finished, or whose retry could not be sent, while the broker was
   down). It runs after the consumer reconnected, on the closed channel, whose ``connection``
   kombu has set to None, and building a client for it raised ``AttributeError``: Celery again
   stopped the worker as "unrecoverable" (seen in the outage chaos test). A closed channel now
   keeps the parameters of the server it talked to and settles on a short-lived pool to it, as
   it would have on its own. If the server is unreachable again, or the settlement is a requeue
   (which needs the released connection's exchange table), it is skipped and the message stays
   unacked in Redis, delivered again after the visibility timeout (poolq's units are idempotent:
   the ledger's commit markers make a second delivery a no-op).
"""
from __future__ import annotations

import logging

import redis.exceptions
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)

_UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class QoS(kombu_redis.QoS):
    def restore_unacked_once(self, client=None):
        try:
            return super().restore_unacked_once(client)
        except (AttributeError, *_UNREACHABLE) as exc:
            log.warning("unacked messages not restored while the broker is unreachable (%s: %s); "
                        "they stay in Redis until its visibility timeout", type(exc).__name__, exc)
            return None

    def ack(self, delivery_tag):
        if self.channel.connection is None:
            return self._settle_after_close("ack", delivery_tag, lambda: super(QoS, self).ack(delivery_tag))
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if self.channel.connection is not None:
            return super().reject(delivery_tag, requeue=requeue)
        if requeue:
            # Putting it back needs the exchange table of the released connection (kombu would log
            # "Could not restore message" and still drop it from the unacked hash): leave it there.
            return self._skip_after_close("requeue", delivery_tag, "putting it back needs the connection's exchanges")
        return self._settle_after_close("reject", delivery_tag, lambda: super(QoS, self).reject(delivery_tag))

    def _settle_after_close(self, settlement: str, delivery_tag, settle) -> None:
        """Settle a message of a channel closed by a lost connection on a pool of its own (see above)."""
        try:
            settle()
        except _UNREACHABLE as exc:
            self._skip_after_close(settlement, delivery_tag, f"the broker is unreachable ({exc})")
        else:
            log.info("%s of message %s done on a new connection: its channel was closed by a lost connection",
                     settlement, delivery_tag)
        finally:
            self.channel._disconnect_pools()

    def _skip_after_close(self, settlement: str, delivery_tag, why: str) -> None:
        self._delivered.pop(delivery_tag, None)  # this closed channel's bookkeeping; Redis keeps it unacked
        log.warning("%s of message %s skipped: its channel was closed by a lost connection and %s; it stays "
                    "unacked in Redis until its visibility timeout and is delivered again", settlement, delivery_tag, why)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _server_params: dict | None = None  # the last synchronous pool's parameters

    def _connparams(self, asynchronous=False):
        if self.connection is None and self._server_params is not None and not asynchronous:
            return dict(self._server_params)  # closed by a lost connection: the same server, a new pool
        params = super()._connparams(asynchronous=asynchronous)
        if not asynchronous:
            self._server_params = dict(params)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel

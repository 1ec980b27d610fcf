"""The lane over Redis: one list of request ids, each request under its own key, each reply on
its own list. Every key expires, so a lane nobody serves (or nobody reads) empties itself.

``{ns}:queue``          request ids, oldest first (RPUSH by the API, BLPOP by workers); its TTL is
                        raised to each new request's, so ids outlive their requests by little
``{ns}:request:{id}``   the request as JSON, PX = its timeout: a worker claims it with GETDEL
                        (with PTTL, in one transaction: the time left, on Redis' clock); a
                        request found expired or gone is dropped, so a late one is never run
``{ns}:reply:{id}``     a list holding the reply as JSON (RPUSH by the worker, PX = the time the
                        request had left plus a grace); the API waits on it with BLPOP

Deadlines are measured on Redis' clock (the TTLs), never compared across machines' clocks.
"""
from __future__ import annotations

import logging
import math
import time
import uuid

import redis
from pydantic import ValidationError

from poolq.jobs.lane.embedding_lane import EmbeddingLane, LaneTimeout, TakenRequest
from poolq.jobs.lane.lane_messages import EmbeddingReply, EmbeddingRequest
from poolq.jobs.settings import Settings

log = logging.getLogger(__name__)

NAMESPACE = "poolq:lane"
# A reply outlives its request's deadline by this much: the caller may be a moment late to read it.
REPLY_GRACE_MS = 5_000
# One BLPOP waits at most this long, and at most a quarter of the client's socket timeout (redis-py's
# default is 5 s; Redis ends blocking waits on its 100 ms timer): a long wait is several short
# ones, and a dead connection is still noticed.
WAIT_SLICE_S = 1.0
_REDIS_DEFAULT_SOCKET_TIMEOUT_S = 5.0

# KEYS: queue, request key. ARGV: ttl_ms, request JSON, request id. One round trip, all or nothing.
_SEND = """
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[3])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 1
"""


class RedisEmbeddingLane(EmbeddingLane):
    def __init__(self, client: redis.Redis, namespace: str = NAMESPACE) -> None:
        self._client = client
        self._namespace = namespace
        self._send = client.register_script(_SEND)
        socket_timeout = client.connection_pool.connection_kwargs.get("socket_timeout", _REDIS_DEFAULT_SOCKET_TIMEOUT_S)
        self._slice_s = min(WAIT_SLICE_S, socket_timeout / 4) if socket_timeout else WAIT_SLICE_S

    @classmethod
    def from_settings(cls, settings: Settings) -> "RedisEmbeddingLane":
        """A lane with its own connections (a worker's lane thread blocks one while it waits)."""
        return cls(settings.broker.redis_client("worker"))

    @property
    def queue_key(self) -> str:
        return f"{self._namespace}:queue"

    def request_key(self, request_id: str) -> str:
        return f"{self._namespace}:request:{request_id}"

    def reply_key(self, request_id: str) -> str:
        return f"{self._namespace}:reply:{request_id}"

    # -- the API's side ------------------------------------------------------------------------
    def call(self, request: EmbeddingRequest, timeout_s: float) -> EmbeddingReply:
        request_id = uuid.uuid4().hex
        deadline = time.monotonic() + timeout_s
        ttl_ms = max(1, math.ceil(timeout_s * 1000))
        self._send(keys=[self.queue_key, self.request_key(request_id)],
                   args=[ttl_ms, request.model_dump_json(), request_id])
        payload = self._pop(self.reply_key(request_id), deadline)
        if payload is None:
            self._client.delete(self.request_key(request_id))  # not taken yet: now no worker will run it
            raise LaneTimeout(f"no worker answered within {timeout_s:g} s")
        return EmbeddingReply.model_validate_json(payload)

    def _pop(self, key: str, deadline: float) -> bytes | str | None:
        """The first item of list ``key``, waiting for one until ``deadline`` (time.monotonic())."""
        while (left := deadline - time.monotonic()) > 0:
            # BLPOP's timeout 0 would mean "forever": wait at least a millisecond.
            popped = self._client.blpop([key], timeout=min(max(left, 0.001), self._slice_s))
            if popped is not None:
                return popped[1]
        return None

    # -- a worker's side -----------------------------------------------------------------------
    def take(self, wait_s: float) -> TakenRequest | None:
        end = time.monotonic() + wait_s
        while (popped := self._pop(self.queue_key, end)) is not None:
            request_id = _text(popped)
            pipe = self._client.pipeline(transaction=True)
            pipe.pttl(self.request_key(request_id))
            pipe.getdel(self.request_key(request_id))
            ttl_ms, payload = pipe.execute()
            if payload is None or ttl_ms <= 0:  # expired: its caller has given up
                continue
            deadline = time.monotonic() + ttl_ms / 1000
            try:
                request = EmbeddingRequest.model_validate_json(payload)
            except ValidationError as exc:  # an API of another version: tell its caller now, not at the deadline
                log.warning("lane request %s is not one this worker reads: %s", request_id, exc)
                self._push_reply(request_id, EmbeddingReply(failure="the worker cannot read this request"), ttl_ms)
                continue
            return TakenRequest(request_id, request, deadline)
        return None

    def reply(self, taken: TakenRequest, reply: EmbeddingReply) -> None:
        self._push_reply(taken.request_id, reply, max(1, math.ceil(taken.remaining_s * 1000)))

    def _push_reply(self, request_id: str, reply: EmbeddingReply, left_ms: int) -> None:
        key = self.reply_key(request_id)
        pipe = self._client.pipeline(transaction=True)
        pipe.rpush(key, reply.model_dump_json())
        pipe.pexpire(key, left_ms + REPLY_GRACE_MS)
        pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

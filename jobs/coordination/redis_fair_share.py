"""Fair share in Redis, shared by every API and worker process; each operation is one Lua script.

Keys: ``poolq:fair:tenants`` (sorted set: tenants with shards to hand out, by virtual time),
``poolq:fair:tenant:<t>`` (sorted set: the tenant's jobs with shards left, by virtual time),
``poolq:fair:clock`` (the virtual time of the latest shard handed out), ``poolq:fair:inflight``
(set of ``job:shard`` in flight, every job), and per job ``poolq:job:<id>:fair`` (hash: tenant,
shards, cost, cursor, closed) and ``poolq:job:<id>:inflight`` (set of shard numbers).
"""
from __future__ import annotations

from poolq.jobs.coordination.fair_share import Claim, FairShare

_TENANTS, _CLOCK, _IN_FLIGHT = "poolq:fair:tenants", "poolq:fair:clock", "poolq:fair:inflight"

# KEYS[1] tenants, KEYS[2] the tenant's jobs, KEYS[3] the job's hash, KEYS[4] clock;
# ARGV[1] tenant, ARGV[2] job, ARGV[3] shards, ARGV[4] cost.
_OPEN_LUA = """
if redis.call('HGET', KEYS[3], 'closed') == '1' then return 0 end
redis.call('HSETNX', KEYS[3], 'cursor', 0)
redis.call('HSET', KEYS[3], 'tenant', ARGV[1], 'shards', ARGV[3], 'cost', ARGV[4])
if tonumber(redis.call('HGET', KEYS[3], 'cursor')) >= tonumber(ARGV[3]) then return 0 end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], tonumber(redis.call('GET', KEYS[4]) or '0'), ARGV[1])
end
if not redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  local front = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  redis.call('ZADD', KEYS[2], front[2] or 0, ARGV[2])
end
return 1
"""
# KEYS[1] tenants, KEYS[2] in flight (every job), KEYS[3] clock; ARGV[1] capacity. Returns job, shard, job, shard...
_CLAIM_LUA = """
local claimed = {}
local room = tonumber(ARGV[1]) - redis.call('SCARD', KEYS[2])
while room > 0 do
  local front = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #front == 0 then break end
  local tenant, tenant_time = front[1], tonumber(front[2])
  local jobs_key = 'poolq:fair:tenant:' .. tenant
  local first = redis.call('ZRANGE', jobs_key, 0, 0, 'WITHSCORES')
  if #first == 0 then
    redis.call('ZREM', KEYS[1], tenant)
  else
    local job, job_time = first[1], tonumber(first[2])
    local job_key = 'poolq:job:' .. job .. ':fair'
    local cursor = tonumber(redis.call('HGET', job_key, 'cursor') or '0')
    local cost = tonumber(redis.call('HGET', job_key, 'cost') or '1')
    if cursor < tonumber(redis.call('HGET', job_key, 'shards') or '0') then
      redis.call('HSET', job_key, 'cursor', cursor + 1)
      redis.call('SADD', 'poolq:job:' .. job .. ':inflight', cursor)
      redis.call('SADD', KEYS[2], job .. ':' .. cursor)
      redis.call('SET', KEYS[3], tenant_time)
      redis.call('ZADD', KEYS[1], tenant_time + cost, tenant)
      redis.call('ZADD', jobs_key, job_time + cost, job)
      table.insert(claimed, job)
      table.insert(claimed, cursor)
      room = room - 1
      cursor = cursor + 1
    end
    if cursor >= tonumber(redis.call('HGET', job_key, 'shards') or '0') then
      redis.call('ZREM', jobs_key, job)
      if redis.call('ZCARD', jobs_key) == 0 then redis.call('ZREM', KEYS[1], tenant) end
    end
  end
end
return claimed
"""
# KEYS[1] tenants, KEYS[2] the job's hash; ARGV[1] job, ARGV[2] 1: mark it closed (0: it is finished).
_UNSCHEDULE_LUA = """
local tenant = redis.call('HGET', KEYS[2], 'tenant')
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], 'closed', '1') end
if not tenant then return 0 end
local jobs_key = 'poolq:fair:tenant:' .. tenant
redis.call('ZREM', jobs_key, ARGV[1])
if redis.call('ZCARD', jobs_key) == 0 then redis.call('ZREM', KEYS[1], tenant) end
return 1
"""


class RedisFairShare(FairShare):
    def __init__(self, redis_client) -> None:
        self.redis = redis_client
        self._open = redis_client.register_script(_OPEN_LUA)
        self._claim = redis_client.register_script(_CLAIM_LUA)
        self._unschedule = redis_client.register_script(_UNSCHEDULE_LUA)

    @staticmethod
    def _job_key(job_id: str) -> str:
        return f"poolq:job:{job_id}:fair"

    @staticmethod
    def _in_flight_key(job_id: str) -> str:
        return f"poolq:job:{job_id}:inflight"

    def open(self, job_id: str, tenant: str, num_shards: int, shard_cost: float) -> None:
        keys = [_TENANTS, f"poolq:fair:tenant:{tenant}", self._job_key(job_id), _CLOCK]
        self._open(keys=keys, args=[tenant, job_id, num_shards, max(shard_cost, 1.0)])

    def close(self, job_id: str) -> None:
        self._unschedule(keys=[_TENANTS, self._job_key(job_id)], args=[job_id, 1])

    def claim(self, capacity: int) -> list[Claim]:
        flat = self._claim(keys=[_TENANTS, _IN_FLIGHT, _CLOCK], args=[capacity])
        return [Claim(job.decode() if isinstance(job, bytes) else job, int(shard)) for job, shard in zip(flat[::2], flat[1::2])]

    def release(self, job_id: str, shard: int) -> None:
        self.redis.pipeline().srem(self._in_flight_key(job_id), shard).srem(_IN_FLIGHT, f"{job_id}:{shard}").execute()

    def in_flight(self, job_id: str) -> list[int]:
        return sorted(int(shard) for shard in self.redis.smembers(self._in_flight_key(job_id)))

    def in_flight_total(self) -> int:
        return int(self.redis.scard(_IN_FLIGHT))

    def cursor(self, job_id: str) -> int:
        return int(self.redis.hget(self._job_key(job_id), "cursor") or 0)

    def forget(self, job_id: str) -> None:
        self._unschedule(keys=[_TENANTS, self._job_key(job_id)], args=[job_id, 0])
        shards = self.in_flight(job_id)
        pipe = self.redis.pipeline()
        if shards:
            pipe.srem(_IN_FLIGHT, *(f"{job_id}:{shard}" for shard in shards))
        pipe.delete(self._job_key(job_id), self._in_flight_key(job_id))
        pipe.execute()

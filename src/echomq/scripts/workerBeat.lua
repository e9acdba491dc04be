-- workerBeat: a worker says it is alive (or, with no info, that it stops):
-- its registry hash and index entry (includes/workers.lua), refreshed by
-- each heartbeat; expired entries pruned, at most Workers.PRUNE per call.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the worker's id
-- ARGV[8]     ttl in ms: the worker is gone this long after this beat
-- ARGV[9]     what it tells, JSON (host, pid, queues, concurrency, running
--             job ids); "" = it stops: its entry goes now
--
-- Returns: the time of this beat (ms).
-- @include fixed
-- @include keys
-- @include clock
-- @include workers

local id, ttl, info = ARGV[7], tonumber(ARGV[8]), ARGV[9]
local now = now_ms()
local index, wk = Workers.index(), Workers.key(id)
-- read phase: the worker's hash, and the index's expired entries
local started = read_key("HGET", wk, "st")
read_key("EXISTS", index)
local expired = redis.call("ZRANGEBYSCORE", index, "-inf", "(" .. fmt(now), "LIMIT", 0, Workers.PRUNE)
-- write phase
if #expired > 0 then redis.call("ZREM", index, unpack(expired)) end
if info == "" then
  redis.call("ZREM", index, id)
  redis.call("DEL", wk)
  return fmt(now)
end
redis.call("HSET", wk, "i", info, "st", started or fmt(now), "se", fmt(now))
redis.call("PEXPIRE", wk, ttl)
redis.call("ZADD", index, fmt(now + ttl), id)
return fmt(now)

-- release: hand a claimed job back unfinished (a worker shutting down), only
-- from the holder of its lease. The job is waiting again at once, at its old
-- place in its lane (as reap_expired returns it, includes/time.lua), but it
-- counts no stall, and the attempt it was on is given back because it did not
-- run to its end.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     lease token the caller holds
-- ARGV[9]     delay in ms before it is waiting again (0 = at once: its old
--             place; later: delayed, then behind the jobs waiting then)
-- ARGV[10]    throttle the job's lane for this many ms from now ("" = no):
--             a handler's RateLimited (a throttle never shortens one in force)
-- ARGV[11]    the job's log entry as JSON ("" or absent = none: includes/logs.lua)
--
-- Returns: 1 when released,
--          E_NOT_FOUND (-1) if the job does not exist,
--          E_LEASE_LOST (-2) if the caller no longer holds the lease.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include batch
-- @include logs
-- @include lease

local id = ARGV[7]
local now = now_ms()
-- read phase: the lease, the job's lane and place
local jk, key_or_err, lane, _, lg, _, batch = check_lease(id, ARGV[8], now)
if not jk then return key_or_err end
Batch.read(batch)
local f = read_key("HMGET", jk, "g", "sc", "a")
local entry = (ARGV[11] or "") ~= "" and cjson.decode(ARGV[11])
local log_state = entry and Logs.read(id, lg)
read_lane({}, f[1])
local lane = f[1] or ""
plan_recheck(lane)
-- write phase
if entry then redis.call("HSET", jk, "lg", Logs.append(id, log_state, entry, now)) end
redis.call("ZREM", K_ACTIVE, id)
give_back(lane, 1)
if batch then Batch.moved(batch, {a = -1}, nil, now) end
if (ARGV[10] or "") ~= "" then
  local until_ms = now + tonumber(ARGV[10])
  if until_ms > tonumber(redis.call("HGET", K_LANECTL, "t:" .. lane) or "0") then
    redis.call("HSET", K_LANECTL, "t:" .. lane, until_ms)
    META.mark("fl")  -- a lane control now (includes/fixed.lua)
  end
end
if tonumber(f[3] or "0") > 0 then redis.call("HINCRBY", jk, "a", -1) end
local delay = tonumber(ARGV[9] or "0")
if delay > 0 then
  local fire = fmt(now + delay)
  ring_if_earliest(fire)
  redis.call("HSET", jk, "s", "delayed", "at", fire)
  redis.call("ZADD", K_DELAYED, fire, id)
  count_delayed(lane, 1)
  recheck(lane, now)
  emit("released", id, lane, "nx", fire)
  flush_events()
  return 1
end
redis.call("HSET", jk, "s", "waiting")
enter_lane(f[1], id, f[2])
emit("released", id, lane)
flush_waiting()
recheck(lane, now)
flush_events()
return 1

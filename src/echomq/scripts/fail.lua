-- fail: record a failed attempt, only from the holder of its lease; the job
-- is retried after the given delay while attempts remain, else it is dead.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     lease token the caller holds
-- ARGV[9]     error message
-- ARGV[10]    traceback ("" = none)
-- ARGV[11]    retry delay in ms (-1 = do not retry: dead now; -2 = the
--             queue's backoff, includes/backoff.lua)
-- ARGV[12..15] the client's backoff option: base_ms, factor, cap_ms, jitter
--             (used with -2 when no backoff is stored)
-- ARGV[16]    the job's log entry as JSON ("" or absent = none: includes/logs.lua)
--
-- Returns: {"failed", fire_ms} when a retry is scheduled,
--          {"dead", now_ms} when the job is dead,
--          E_NOT_FOUND (-1) or E_LEASE_LOST (-2); a job this same lease
--          already failed (a retry after a lost reply) answers as before.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include batch
-- @include tags
-- @include dedupe
-- @include logs
-- @include metrics
-- @include retention
-- @include lease
-- @include backoff

local id, delay = ARGV[7], tonumber(ARGV[11])
local now = now_ms()
-- read phase: the job, its idempotency key and (if it dies) the pruning
local jk, key_or_err, lane, _, lg, lease_fields, batch = check_lease(id, ARGV[8], now)
if not jk then
  -- a retried call whose first reply was lost: the same lease already failed it
  local done = key_or_err == E_LEASE_LOST and finished_by(id, ARGV[8], {failed = true, dead = true})
  if done then return {done[1], done[1] == "failed" and done[4] or done[3]} end
  return key_or_err
end
local f = read_key("HMGET", jk, "a", "m", "g", "dn")
local entry = (ARGV[16] or "") ~= "" and cjson.decode(ARGV[16])
local log_state = entry and Logs.read(id, lg)
local lane = f[3] or ""
plan_recheck(lane)
Batch.read(batch)
if delay == -2 then
  local client = {tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])}
  delay = backoff_ms(math.max(1, tonumber(f[1])), client)
end
local retry = delay >= 0 and tonumber(f[1]) < tonumber(f[2])
local victims, record = {}, nil
if not retry then
  if key_or_err then record = read_key("GET", idem_key(key_or_err)) end
  victims = read_prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now, {id})
end
-- the failed run in the minute's metrics (a queue with them on)
Metrics.ended(lease_fields[8], retry and 2 or 3, lease_fields[9], lease_fields[10],
  lease_fields[11], now)
Metrics.read_ended(now)
-- write phase
local log_fields = {}
if entry then log_fields = {"lg", Logs.append(id, log_state, entry, now)} end
redis.call("ZREM", K_ACTIVE, id)
give_back(lane, 1)
recheck(lane, now)
redis.call("HINCRBY", K_META, "failed", 1)
Metrics.write_ended()
redis.call("HSET", K_META, "last", fmt(now)) -- last activity (stats)
if retry then
  local fire = fmt(now + delay)
  ring_if_earliest(fire)
  redis.call("HSET", jk, "e", ARGV[9], "tb", ARGV[10], "s", "failed", "at", fire, unpack(log_fields))
  redis.call("ZADD", K_DELAYED, fire, id)
  redis.call("ZADD", K_RETRYING, fire, id)
  count_delayed(lane, 1)
  emit("retrying", id, lane, "a", f[1], "e", event_error(ARGV[9]), "nx", fire)
  if batch then Batch.moved(batch, {a = -1}, nil, now) end
  flush_events()
  return {"failed", fire}
end
redis.call("HSET", jk, "e", ARGV[9], "tb", ARGV[10], "s", "dead", "f", fmt(now), unpack(log_fields))
Dedupe.finish(key_or_err, id, now, OPT.keep_dead_ms, record)
redis.call("ZADD", K_DEAD, fmt(now), id)
apply_prune(K_DEAD, victims)
orphan_dependents(id, f[4], now)
emit("dead", id, lane, "a", f[1], "e", event_error(ARGV[9]))
if batch then Batch.moved(batch, {a = -1, d = 1}, id, now) end
flush_events()
wake_waiters(id, now)
return {"dead", fmt(now)}

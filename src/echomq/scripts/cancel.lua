-- cancel: take a job out of the queue's hands. A job not started yet
-- (waiting, delayed, retry pending) is removed; a running (active) job is
-- taken from its lease holder, whose next heartbeat hears E_CANCELLED and
-- stops the handler, and goes dead or back to waiting as the caller chose.
-- A queue with metrics on counts it (includes/metrics.lua): a running job
-- dead, or failed when retried; one not started, cancelled.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     what a running job becomes: "dead" | "retry" (a retry that
--             fires when the cancelled lease would have ended, by which time
--             the holder's heartbeat has stopped the handler; the attempt
--             counts)
--
-- Returns: "removed" (it had not started), "stopped" (it was running),
--          "finished" (completed or dead already: nothing changed), or
--          E_NOT_FOUND (-1).
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

local id, running_to = ARGV[7], ARGV[8]
local jk = job_key(id)
-- read phase: the job, its lane or idempotency key, and what burying it touches
local f = read_key("HMGET", jk, "s", "g", "l", "cl", "dn", "b")
if not f[1] then return E_NOT_FOUND end
local state, lane = f[1], f[2] or ""
if state == "completed" or state == "dead" or state == "cancelled" then return "finished" end
Batch.read(f[6])
local idem = state ~= "active" and read_idem(id)
local now = now_ms()
local burial = state == "active" and running_to ~= "retry" and bury(id, now)  -- reads only
local lane_size = state == "waiting" and read_key("ZCARD", lane_key(lane))
if state == "active" then plan_recheck(lane) end
-- the minute's metrics (a queue with them on): a run ended by the cancel, or a
-- job that never ran
if OPT.metrics then
  local m = read_key("HMGET", jk, "n", "c", "at", "ca")
  if state ~= "active" then
    Metrics.ended(m[1], 4, nil, nil, nil, now)
  else
    Metrics.ended(m[1], running_to == "retry" and 2 or 3, m[2], m[3], m[4], now)
  end
  Metrics.read_ended(now)
end
-- write phase
emit("cancelled", id, lane)
Metrics.write_ended()
if state == "active" then
  redis.call("ZREM", K_ACTIVE, id)
  give_back(lane, 1)
  recheck(lane, now)
  -- the lease that ran it: its heartbeat is told it was cancelled, not lost
  redis.call("HSET", jk, "cx", f[4] or "")
  if running_to == "retry" then
    local fire = fmt(math.max(now, tonumber(f[3] or "0")))
    ring_if_earliest(fire)
    redis.call("HSET", jk, "s", "failed", "at", fire, "e", "Cancelled: retried after the run stops")
    redis.call("ZADD", K_DELAYED, fire, id)
    redis.call("ZADD", K_RETRYING, fire, id)
    count_delayed(lane, 1)
    emit("retrying", id, lane, "e", "Cancelled: retried after the run stops", "nx", fire)
    if f[6] then Batch.moved(f[6], {a = -1}, nil, now) end
  else
    bury(id, now, "Cancelled: stopped by cancel() while it ran", burial)
  end
  flush_events()
  return "stopped"
end
if state == "waiting" then
  local lk = lane_key(lane)
  if redis.call("ZREM", lk, id) == 1 then
    waiting_delta = waiting_delta - 1
    if lane_size == 1 then leave_ring(lane) end
  end
end
if state == "delayed" or state == "failed" or state == "blocked" then
  count_delayed(lane, -1)
end
redis.call("ZREM", K_DELAYED, id)
redis.call("ZREM", K_RETRYING, id)
redis.call("ZREM", K_BLOCKED, id)
drop_job(id, idem)
orphan_dependents(id, f[5], now)
if f[6] then Batch.moved(f[6], {t = -1}, nil, now) end  -- removed: it leaves its batch
emit("removed", id, lane)
flush_waiting()
flush_events()
return "removed"

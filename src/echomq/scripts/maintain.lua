-- maintain: the periodic work every worker runs (safe to run concurrently):
-- promote due delayed jobs, return expired leases, prune finished jobs, each
-- at most a fixed budget per call (includes/time.lua, retention.lua); a
-- next_fire or next_deadline at or before now_ms says more is due at once.
-- It also reads (never fires) the schedules that are due, at most
-- ARGV[7] of them: the client computes their next fire times and fires them
-- with fireSchedules (a compare-and-set each).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the most due schedules to return
--
-- Returns: {promoted, reaped, pruned, next_fire_ms or -1, next_deadline_ms or -1, now_ms,
--           earliest schedule fire ms or -1, {id, fire ms, definition JSON, ...} due}
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention
-- @include time

local now = now_ms()
-- read everything this call will touch before its first write
local due = read_due(now)
local expired = read_expired(now, true)  -- plans the dead set's pruning too
local completed_victims = read_prune(K_COMPLETED, OPT.keep_completed_ms, OPT.keep_completed, now)
local promoted = promote(due)
local reaped = reap(expired, now)
local pruned = apply_prune(K_COMPLETED, completed_victims) + #expired.dead_victims
flush_waiting()
local nf = redis.call("ZRANGE", K_DELAYED, 0, 0, "WITHSCORES")
local nd = redis.call("ZRANGE", K_ACTIVE, 0, 0, "WITHSCORES")
local ns = redis.call("ZRANGE", K_FIRES, 0, 0, "WITHSCORES")
local due_schedules = {}
if ns[2] and tonumber(ns[2]) <= now then
  local due = redis.call("ZRANGEBYSCORE", K_FIRES, "-inf", fmt(now), "WITHSCORES",
    "LIMIT", 0, tonumber(ARGV[7]))
  for i = 1, #due, 2 do
    due_schedules[#due_schedules + 1] = due[i]
    due_schedules[#due_schedules + 1] = fmt(tonumber(due[i + 1]))
    due_schedules[#due_schedules + 1] = redis.call("HGET", K_SCHEDULES, due[i]) or ""
  end
end
return {promoted, reaped, pruned, nf[2] or "-1", nd[2] or "-1", fmt(now),
  ns[2] and fmt(tonumber(ns[2])) or "-1", due_schedules}

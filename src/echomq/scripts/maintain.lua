-- maintain: the periodic work every worker runs (safe to run concurrently):
-- promote due delayed jobs, return expired leases, prune finished jobs (and
-- the cancelled children of batches) and
-- expired wait() entries, sweep ended lane throttles, go on with a
-- renumbering of the arrival counter, release the dependents of completed
-- jobs (includes/dependencies.lua), each at most a fixed budget per call
-- (includes/time.lua, retention.lua, controls.lua,
-- renumber.lua); a next_fire or next_deadline at or before now_ms says more
-- is due at once. It also reads (never fires) the schedules that are due, at
-- most ARGV[7] of them: the client computes their next fire times and fires
-- them with fireSchedules (a compare-and-set each).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the most due schedules to return
--
-- Returns: {promoted, reaped, pruned, next_fire_ms or -1, next_deadline_ms or -1, now_ms,
--           job hashes renumbered (includes/renumber.lua),
--           earliest schedule fire ms or -1, {id, fire ms, definition JSON, ...} due,
--           dependents released, completed jobs with dependents still to release}
--   next_fire_ms: the earliest delayed job's fire time or the earliest time a
--   parked lane's throttle or rate window ends, or the queue-wide rate window
--   a claim was turned away by ends (includes/controls.lua)
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include renumber
-- @include controls
-- @include batch
-- @include tags
-- @include dedupe
-- @include logs
-- @include metrics
-- @include retention
-- @include time
-- @include readers
-- @include dependencies

local now = now_ms()
-- read everything this call will touch before its first write
local due = read_due(now)
local expired = read_expired(now, true)  -- plans the dead set's pruning too
local completed_victims = read_prune(K_COMPLETED, OPT.keep_completed_ms, OPT.keep_completed, now,
  nil, READERS)
-- children of cancelled batches that never ran: kept as dead jobs are (their
-- cancel steps prune too; this ages them out once cancels stop)
local cancelled_victims = redis.call("EXISTS", K_CANCELLED) == 1
  and read_prune(K_CANCELLED, OPT.keep_dead_ms, OPT.keep_dead, now) or {}
-- completed jobs with dependents left to release (more than one call's budget)
local releasing = redis.call("ZRANGEBYSCORE", K_RELEASING, "-inf", fmt(now), "LIMIT", 0, 100)
local releases = read_releases(releasing, RELEASE_BUDGET, {})
-- parked lanes whose throttle or rate window ended
local woken = redis.call("ZRANGEBYSCORE", K_LANEWAKE, "-inf", fmt(now), "LIMIT", 0, WAKE_BUDGET)
for _, lane in ipairs(woken) do plan_recheck(lane) end
local renumber_step = read_renumber(#due.ids)
local sweep = read_sweep(now)  -- throttles that have ended (includes/controls.lua)
-- the jobs this call ends, in the minute's metrics (a queue with them on: includes/metrics.lua)
Metrics.read_ended(now)
local renumbered = apply_renumber(renumber_step)   -- first write
local promoted = promote(due)
local reaped, freed = reap(expired, now)
local pruned = apply_prune(K_COMPLETED, completed_victims) + #expired.dead_victims
  + apply_prune(K_CANCELLED, cancelled_victims)
local released = apply_releases(releases, now)
Metrics.write_ended()
flush_waiting()
flush_events()
prune_waiters(now)
-- the waiters' mark goes once no client waits (includes/fixed.lua, features)
if redis.call("EXISTS", K_WAITERS) == 0 then META.unmark("fw") end
recheck_freed(freed, now)
for _, lane in ipairs(woken) do recheck(lane, now) end
apply_sweep(sweep)
local first_due = redis.call("ZRANGE", K_DELAYED, 0, 0, "WITHSCORES")[2]
local nf = first_due
-- a parked lane whose throttle or rate window ends counts as a fire time: the
-- worker runs maintenance then, which puts the lane back and rings the doorbell
local lw = next_lane_wake()
if lw and (not nf or tonumber(lw) < tonumber(nf)) then nf = lw end
-- a claim turned away by the queue-wide rate: ring when its window ends
local qr = redis.call("HGET", K_LANECTL, "qr")
if qr and tonumber(qr) <= now then
  redis.call("HDEL", K_LANECTL, "qr")
  ring_doorbell()
elseif qr and (not nf or tonumber(qr) < tonumber(nf)) then
  nf = qr
end
local nd = redis.call("ZRANGE", K_ACTIVE, 0, 0, "WITHSCORES")
-- the timed sets' bounds, exact again (includes/fixed.lua META.note)
if META.value("v") == FORMAT then
  META.put("td", first_due and fmt(tonumber(first_due)) or fmt(META.NO_TIME))
  META.put("tx", nd[2] and fmt(tonumber(nd[2])) or fmt(META.NO_TIME))
  -- the default lane's active count, at most the active set's size: an older
  -- client that held one of its jobs when the queue was upgraded gives it back
  -- where its format keeps the count (K_LANECTL), never here (docs/design.md §9)
  local counted = tonumber(META.value("a:")) or 0
  if counted > 0 then
    local active = nd[2] and redis.call("ZCARD", K_ACTIVE) or 0
    if counted > active then META.put("a:", fmt(active)) end
  end
end
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
local more_releases = redis.call("ZCOUNT", K_RELEASING, "-inf", fmt(now))
return {promoted, reaped, pruned, nf or "-1", nd[2] or "-1", fmt(now),
  renumbered, ns[2] and fmt(tonumber(ns[2])) or "-1", due_schedules, released, more_releases}

-- maintain: the periodic work every worker runs (safe to run concurrently):
-- promote due delayed jobs, return expired leases, prune finished jobs.
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
--
-- Returns: {promoted, reaped, pruned, next_fire_ms or -1, next_deadline_ms or -1, now_ms}
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention
-- @include time

local now = now_ms()
local promoted = promote_due(now)
local reaped = reap_expired(now)
local pruned = prune(K_COMPLETED, OPT.keep_completed_ms, OPT.keep_completed, now)
  + prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now)
flush_waiting()
local nf = redis.call("ZRANGE", K_DELAYED, 0, 0, "WITHSCORES")
local nd = redis.call("ZRANGE", K_ACTIVE, 0, 0, "WITHSCORES")
return {promoted, reaped, pruned, nf[2] or "-1", nd[2] or "-1", fmt(now)}

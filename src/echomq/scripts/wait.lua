-- wait: register a client's wait() on a job, or answer at once when the job
-- is final (completed or dead). The client subscribes to the queue's done
-- channel first, so a final transition after this call is always heard
-- (includes/retention.lua, "Waiters").
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     how long the client waits, ms (the entry's deadline is now + this)
--
-- Returns: the job's hash as field, value pairs when it is completed or dead,
--          0 when the wait is registered, E_NOT_FOUND (-1) for no such job.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include tags
-- @include dedupe
-- @include logs
-- @include retention

local id = ARGV[7]
local now = now_ms()
-- read phase: the job
local state = read_key("HGET", job_key(id), "s")
if not state then return E_NOT_FOUND end
if state == "completed" or state == "dead" then
  return redis.call("HGETALL", job_key(id))
end
-- write phase: expired entries first (bounded), then this wait
prune_waiters(now)
redis.call("ZADD", K_WAITERS, "GT", fmt(now + tonumber(ARGV[8])), id)
META.stamp_format()  -- (a new queue: its format first)
META.mark("fw")  -- the waiters' mark (includes/fixed.lua, features)
return 0

-- remove: delete a job in whatever state it is; a holder of its lease will
-- then get JobNotFound when it completes.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: 1 if the job existed and is gone, 0 if there was no such job.
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
-- @include retention
-- @include readers

local id = ARGV[7]
-- read phase: the job, its lane and its idempotency key
local f = read_key("HMGET", job_key(id), "s", "g", "dn", "b")
if not f[1] then return 0 end
Batch.read(f[4])
f[2] = f[2] or ""  -- the default lane is not stored
local lk = lane_key(f[2])
local lane_size = 0
if f[1] == "waiting" then lane_size = read_key("ZCARD", lk) end
local idem = read_idem(id)
-- a completed job's readers (includes/readers.lua) go with it
local readers = f[1] == "completed" and f[3] and read_key("EXISTS", readers_key(id)) == 1
if f[1] == "active" then plan_recheck(f[2]) end
local now = now_ms()
-- write phase
if f[1] == "waiting" and redis.call("ZREM", lk, id) == 1 then
  waiting_delta = waiting_delta - 1
  if lane_size == 1 then leave_ring(f[2]) end
end
-- a batch's child removed before it finished leaves the batch (total - 1):
-- the batch may be finished now (includes/batch.lua)
local finished = {completed = true, dead = true, cancelled = true}
if f[4] and not finished[f[1]] then
  Batch.moved(f[4], {t = -1, a = f[1] == "active" and -1 or 0}, nil, now)
end
for _, zkey in ipairs({K_DELAYED, K_RETRYING, K_ACTIVE, K_COMPLETED, K_DEAD, K_BLOCKED,
    K_CANCELLED}) do
  redis.call("ZREM", zkey, id)
end
if f[1] == "delayed" or f[1] == "failed" or f[1] == "blocked" then count_delayed(f[2], -1) end
if f[1] == "active" then
  give_back(f[2], 1)
  recheck(f[2], now)
end
drop_job(id, idem)
if readers then redis.call("DEL", readers_key(id)) end
-- a completed job's dependents were released (or are being released) already
if f[1] ~= "completed" then orphan_dependents(id, f[3], now_ms()) end
emit("removed", id, f[2])
flush_waiting()
flush_events()
return 1

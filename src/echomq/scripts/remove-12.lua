-- remove: delete a job in whatever state it is; a holder of its lease will
-- then get JobNotFound when it completes.
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: 1 if the job existed and is gone, 0 if there was no such job.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention

local id = ARGV[7]
local jk = job_key(id)
local f = redis.call("HMGET", jk, "s", "g")
if not f[1] then return 0 end
f[2] = f[2] or ""  -- the default lane is not stored
if f[1] == "waiting" then
  local lk = lane_key(f[2])
  if redis.call("ZREM", lk, id) == 1 then
    waiting_delta = waiting_delta - 1
    if redis.call("ZCARD", lk) == 0 then leave_ring(f[2]) end
  end
end
for _, zkey in ipairs({K_DELAYED, K_RETRYING, K_ACTIVE, K_COMPLETED, K_DEAD}) do
  redis.call("ZREM", zkey, id)
end
drop_job(id)
flush_waiting()
return 1

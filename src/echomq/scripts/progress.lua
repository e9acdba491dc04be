-- progress: store a running job's progress report, only from the holder of
-- its lease; get() reads it back as Job.progress.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     lease token the caller holds
-- ARGV[9]     progress (JSON)
--
-- Returns: 1 when stored, E_NOT_FOUND (-1) or E_LEASE_LOST (-2).
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lease

local now = now_ms()
local jk, key_or_err, lane = check_lease(ARGV[7], ARGV[8], now)
if not jk then return key_or_err end
redis.call("HSET", jk, "pg", ARGV[9])
if #ARGV[9] <= PROGRESS_BYTES then
  emit("progress", ARGV[7], lane, "pg", ARGV[9])
else
  emit("progress", ARGV[7], lane)
end
flush_events()
return 1

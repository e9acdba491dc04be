-- complete: record a job's result, only from the holder of its lease.
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     lease token the caller holds
-- ARGV[9]     result (JSON)
--
-- Returns: the finish time (ms) on success,
--          E_NOT_FOUND (-1) if the job does not exist,
--          E_LEASE_LOST (-2) if the caller no longer holds the lease.
-- @include fixed
-- @include keys
-- @include clock
-- @include retention
-- @include lease

local id = ARGV[7]
local now = now_ms()
local jk, err = check_lease(id, ARGV[8], now)
if not jk then return err end
redis.call("ZREM", K_ACTIVE, id)
redis.call("HSET", jk, "s", "completed", "r", ARGV[9], "f", fmt(now))
redis.call("HDEL", jk, "l")
redis.call("HINCRBY", K_META, "completed", 1)
redis.call("ZADD", K_COMPLETED, fmt(now), id)
prune(K_COMPLETED, OPT.keep_completed_ms, OPT.keep_completed, now)
return now

-- extend: renew a lease (heartbeat), only from its holder.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     lease token the caller holds
-- ARGV[9]     new lease length in ms, counted from now
--
-- Returns: the new deadline (ms), E_NOT_FOUND (-1) or E_LEASE_LOST (-2).
-- @include fixed
-- @include keys
-- @include clock
-- @include lease

local id = ARGV[7]
local now = now_ms()
local jk, key_or_err = check_lease(id, ARGV[8], now)
if not jk then return key_or_err end
local deadline = fmt(now + tonumber(ARGV[9]))
redis.call("ZADD", K_ACTIVE, "XX", deadline, id)
META.note("tx", deadline)
redis.call("HSET", jk, "l", deadline)
return deadline

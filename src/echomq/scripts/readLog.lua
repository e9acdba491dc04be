-- readLog: one job's log (read-only; includes/logs.lua), oldest line first.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: {} when there is no such job, else {lg or "", line1, line2, ...}
--          (at most Logs.MAX_LINES lines of at most Logs.MAX_BYTES in all).
-- @include fixed
-- @include keys
-- @include clock
-- @include logs

local id = ARGV[7]
local f = redis.call("HMGET", job_key(id), "s", "lg")
if not f[1] then return {} end
local out = {f[2] or ""}
if not f[2] then return out end
for _, line in ipairs(redis.call("LRANGE", Logs.key(id), 0, Logs.MAX_LINES - 1)) do
  out[#out + 1] = line
end
return out

-- listWorkers: the live workers of the queue (read-only; includes/workers.lua),
-- at most Workers.MAX_LISTED, those whose entries expire last first.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
--
-- Returns: {now ms, id1, info1, started1, seen1, id2, ...}.
-- @include fixed
-- @include keys
-- @include clock
-- @include workers

local now = now_ms()
local ids = redis.call("ZREVRANGEBYSCORE", Workers.index(), "+inf", "(" .. fmt(now),
  "LIMIT", 0, Workers.MAX_LISTED)
local out = {fmt(now)}
for _, id in ipairs(ids) do
  local f = redis.call("HMGET", Workers.key(id), "i", "st", "se")
  if f[1] then
    out[#out + 1] = id
    out[#out + 1] = f[1]
    out[#out + 1] = f[2]
    out[#out + 1] = f[3]
  end
end
return out

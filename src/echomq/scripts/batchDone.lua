-- batchDone: as_completed's read: the batch's children that finished after
-- place ``after`` (in the order they first finished), or, when there are
-- none yet, a wait registered under the batch id (as wait.lua does for a
-- job: includes/batch.lua Batch.wake publishes the id when a child finishes).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the batch id
-- ARGV[8]     after: the place of the last child already read (0: none)
-- ARGV[9]     most children returned
-- ARGV[10]    how long the client waits, ms (the wait entry's deadline)
--
-- Returns: {places, hashes} (places[i] the place of the i-th child, hashes[i]
--          its hash as field, value pairs, empty when pruned) when some
--          finished after ``after``; "end" when none did and none will (closed
--          or cancelled, and every child finished); 0 when the wait is
--          registered; E_NOT_FOUND (-1) for no such batch.
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include tags
-- @include retention

local id, after, most = ARGV[7], ARGV[8], tonumber(ARGV[9])
local key = PREFIX .. "batch:" .. id
local f = read_key("HMGET", key, "t", "c", "d", "x", "cl", "k")
if not f[1] then return E_NOT_FOUND end
local rows = redis.call("ZRANGEBYSCORE", PREFIX .. "batch:" .. id .. ":done", "(" .. after,
  "+inf", "WITHSCORES", "LIMIT", 0, most)
if #rows > 0 then
  local places, hashes = {}, {}
  for i = 1, #rows, 2 do
    places[#places + 1] = rows[i + 1]
    local h = redis.call("HGETALL", job_key(rows[i]))
    h[#h + 1] = "id"
    h[#h + 1] = rows[i]
    hashes[#hashes + 1] = h
  end
  return {places, hashes}
end
local finished = tonumber(f[2]) + tonumber(f[3]) + tonumber(f[4])
if (f[5] or f[6]) and finished >= tonumber(f[1]) then return "end" end
local now = now_ms()
prune_waiters(now)
redis.call("ZADD", K_WAITERS, "GT", fmt(now + tonumber(ARGV[10])), id)
META.stamp_format()  -- (a new queue: its format first)
META.mark("fw")  -- the waiters' mark (includes/fixed.lua, features)
return 0

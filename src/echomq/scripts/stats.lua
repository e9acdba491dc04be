-- stats: counts by state, and the ring with each lane's backlog, weight and
-- claims served since it joined the ring (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     most lanes to list (ring order)
--
-- Returns: {counts, lanes, turn, totals, last} where
--   counts = {waiting, delayed, failed, active, completed, dead, ring_length,
--             paused ("1"/"0"), ordering, counter, blocked}
--   lanes  = {lane1, backlog1, weight1, served1, lane2, ...}: the ring, then
--            the parked lanes (includes/controls.lua)
--   turn   = {lane or "", claims left or ""}
--   totals = {added, completed, failed}: counters since the queue was created
--            (added counts jobs newly created, not idempotent hits;
--             failed counts failed attempts)
--   last   = time (ms) of the last add, completion or failed attempt, "" if none
-- @include fixed
-- @include keys

local retrying = redis.call("ZCARD", K_RETRYING)
local counts = {
  redis.call("HGET", K_META, "w") or "0",
  redis.call("ZCARD", K_DELAYED) - retrying,
  retrying,
  redis.call("ZCARD", K_ACTIVE),
  redis.call("ZCARD", K_COMPLETED),
  redis.call("ZCARD", K_DEAD),
  redis.call("LLEN", K_RING),
  redis.call("HGET", K_META, "paused") or "0",
  redis.call("HGET", K_META, "o") or "",
  redis.call("GET", K_COUNTER) or "0",
  redis.call("ZCARD", K_BLOCKED),
}
local lanes = {}
for _, lane in ipairs(redis.call("LRANGE", K_RING, 0, tonumber(ARGV[7]) - 1)) do
  lanes[#lanes + 1] = lane
  lanes[#lanes + 1] = redis.call("ZCARD", lane_key(lane))
  lanes[#lanes + 1] = redis.call("HGET", K_WEIGHTS, lane) or "1"
  lanes[#lanes + 1] = redis.call("HGET", K_SERVED, lane) or "0"
end
-- parked lanes (out of the ring, includes/controls.lua) hold waiting jobs too
local left = tonumber(ARGV[7]) - #lanes / 4
if left > 0 and redis.call("HEXISTS", K_LANECTL, "np") == 1 then
  local cursor, seen = "0", 0
  repeat
    local page = redis.call("HSCAN", K_LANECTL, cursor, "MATCH", "k:*", "COUNT", 500)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      seen = seen + 1
      if left > 0 then
        local lane = string.sub(page[2][i], 3)
        lanes[#lanes + 1] = lane
        lanes[#lanes + 1] = redis.call("ZCARD", lane_key(lane))
        lanes[#lanes + 1] = redis.call("HGET", K_WEIGHTS, lane) or "1"
        lanes[#lanes + 1] = redis.call("HGET", K_SERVED, lane) or "0"
        left = left - 1
      end
    end
  until cursor == "0" or left <= 0 or seen >= 10000
end
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local totals = redis.call("HMGET", K_META, "added", "completed", "failed")
return {counts, lanes, {turn[1] or "", turn[2] or ""},
  {totals[1] or "0", totals[2] or "0", totals[3] or "0"},
  redis.call("HGET", K_META, "last") or ""}

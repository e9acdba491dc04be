-- stats: counts by state, and the ring with each lane's backlog, weight and
-- claims served since it joined the ring (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     most lanes to list in this call (ring order; at most PAGE_MAX)
--
-- Returns: {counts, lanes, turn, totals, last, more} where
--   counts = {waiting, delayed, failed, active, completed, dead, ring_length,
--             paused ("1"/"0"), ordering, counter, blocked, cancelled}
--   lanes  = {lane1, backlog1, weight1, served1, lane2, ...}: the ring's first
--            lanes (the rest, and the parked lanes, come from laneList pages)
--   turn   = {lane or "", claims left or ""}
--   totals = {added, completed, failed}: counters since the queue was created
--            (added counts jobs newly created, not idempotent hits;
--             failed counts failed attempts)
--   last   = time (ms) of the last add, completion or failed attempt, "" if none
--   more   = {phase, cursor} of the laneList page that goes on ("" when done)
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
  redis.call("ZCARD", K_CANCELLED),
}
-- the first page of the ring (bounded); the client reads the rest of the ring
-- and the parked lanes with laneList pages (echomq.lanepages)
local PAGE_MAX = 1000
local size = math.max(1, math.min(tonumber(ARGV[7]), PAGE_MAX))
local lanes = {}
local ring = redis.call("LRANGE", K_RING, 0, size - 1)
for _, lane in ipairs(ring) do
  lanes[#lanes + 1] = lane
  lanes[#lanes + 1] = redis.call("ZCARD", lane_key(lane))
  lanes[#lanes + 1] = redis.call("HGET", K_WEIGHTS, lane) or "1"
  local served = redis.call("HGET", K_SERVED, lane) or "0"
  if META.lane_counts(lane) then served = redis.call("HGET", K_META, "s:") or "0" end
  lanes[#lanes + 1] = served
end
local more = {"", ""}
if #ring == size then
  more = {"r", tostring(size)}
elseif redis.call("HEXISTS", K_LANECTL, "np") == 1 then
  more = {"h", "0"}
end
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local totals = redis.call("HMGET", K_META, "added", "completed", "failed", "lost")
return {counts, lanes, {turn[1] or "", turn[2] or ""},
  {totals[1] or "0", totals[2] or "0", totals[3] or "0", totals[4] or "0"},
  redis.call("HGET", K_META, "last") or "", more}

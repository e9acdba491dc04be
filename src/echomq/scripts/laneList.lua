-- laneList: one page of the lanes with their controls (read-only). The
-- client pages (echomq.lanepages): the ring's lanes in ring order ("r"
-- pages, an offset into the ring list), then the lanes out of the ring ("h"
-- pages, an HSCAN cursor over the controls hash): the parked lanes and, with
-- ARGV[7] "all", the lanes with controls or counters but no waiting job. Each
-- call does bounded work: at most ARGV[10] (≤ PAGE_MAX) ring lanes, or one
-- HSCAN step of about ARGV[10] fields, each field at most one row.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     "all" (every lane) or "waiting" (the lanes holding waiting jobs:
--             the ring, then the parked lanes)
-- ARGV[8]     phase: "r" (ring) or "h" (controls hash)
-- ARGV[9]     cursor: the ring offset ("r") or the HSCAN cursor ("h")
-- ARGV[10]    page size
--
-- Returns: {lanes, turn, now, next phase ("" when done), next cursor} where
--   lanes = {lane, position (-1: not in the ring), backlog, weight, served,
--   concurrency, rate, paused, max_waiting, throttled until, active, parked
--   ("1"/"0"), ...} (empty text where unset) and turn = {lane or "", claims
--   left or ""}
-- @include fixed
-- @include keys
-- @include clock

local PAGE_MAX = 1000
local mode, phase, cursor = ARGV[7], ARGV[8], ARGV[9]
local size = math.max(1, math.min(tonumber(ARGV[10]), PAGE_MAX))
local out, listed = {}, {}
local function put(lane, position)
  listed[lane] = true
  local c = redis.call("HMGET", K_LANECTL, "c:" .. lane, "r:" .. lane, "p:" .. lane,
    "m:" .. lane, "t:" .. lane, "a:" .. lane, "k:" .. lane)
  local served = redis.call("HGET", K_SERVED, lane)
  if META.lane_counts(lane) then
    -- the default lane's counts since format 2 (includes/fixed.lua)
    local m = redis.call("HMGET", K_META, "s:", "a:")
    served = served and (m[1] or "0")
    c[6] = m[2] ~= "0" and m[2] or nil
  end
  local row = {lane, position, redis.call("ZCARD", lane_key(lane)),
    redis.call("HGET", K_WEIGHTS, lane) or "1", served or "0"}
  for i = 1, 6 do row[#row + 1] = c[i] or "" end
  row[#row + 1] = c[7] and "1" or "0"
  for _, v in ipairs(row) do out[#out + 1] = v end
end

local next_phase, next_cursor = "", ""
if phase == "r" then
  local offset = tonumber(cursor)
  local ring = redis.call("LRANGE", K_RING, offset, offset + size - 1)
  for i, lane in ipairs(ring) do put(lane, offset + i - 1) end
  if #ring == size then
    next_phase, next_cursor = "r", tostring(offset + size)
  else
    next_phase, next_cursor = "h", "0"
  end
end
if phase == "h" and (mode == "all" or redis.call("HEXISTS", K_LANECTL, "np") == 1) then
  -- a lane of the ring was listed by the "r" pages: only lanes out of it here
  -- (parked, or holding no waiting job)
  -- COUNT counts buckets, not fields: Valkey 8's hash tables keep up to 7
  -- fields a bucket, so size / 8 buckets give at most about size fields
  local count = math.max(1, math.floor(size / 8))
  local page
  if mode == "all" then
    -- the default lane's active count is in the meta hash since format 2
    -- (includes/fixed.lua), not a field this scan meets: listed on the first page
    if cursor == "0" and not listed[""] and META.lane_counts("")
      and (tonumber(META.value("a:")) or 0) > 0 and redis.call("EXISTS", lane_key("")) == 0 then
      put("", -1)
    end
    page = redis.call("HSCAN", K_LANECTL, cursor, "COUNT", count)
  else
    page = redis.call("HSCAN", K_LANECTL, cursor, "MATCH", "k:*", "COUNT", count)
  end
  for i = 1, #page[2], 2 do
    local kind, lane = string.match(page[2][i], "^(%a):(.*)$")
    if kind and kind ~= "t" and not listed[lane] then
      local parked = redis.call("HEXISTS", K_LANECTL, "k:" .. lane) == 1
      if parked or redis.call("EXISTS", lane_key(lane)) == 0 then
        put(lane, -1)
      else
        listed[lane] = true
      end
    end
  end
  if page[1] ~= "0" then next_phase, next_cursor = "h", page[1] end
end
local turn = redis.call("HMGET", K_TURN, "lane", "left")
return {out, {turn[1] or "", turn[2] or ""}, now_ms(), next_phase, next_cursor}

-- laneList: the lanes with their controls (read-only): the ring's lanes in
-- ring order, then the parked lanes and the lanes with controls but no
-- waiting jobs, at most ARGV[7] lanes in all.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     most lanes to list
--
-- Returns: {lanes, turn, now} where lanes = {lane, position (-1: not in the
--   ring), backlog, weight, served, concurrency, rate, paused, max_waiting,
--   throttled until, active, parked ("1"/"0"), ...} (empty text where unset)
--   and turn = {lane or "", claims left or ""}
-- @include fixed
-- @include keys
-- @include clock

local limit = tonumber(ARGV[7])
local out, listed = {}, {}
local function put(lane, position)
  listed[lane] = true
  local c = redis.call("HMGET", K_LANECTL, "c:" .. lane, "r:" .. lane, "p:" .. lane,
    "m:" .. lane, "t:" .. lane, "a:" .. lane, "k:" .. lane)
  local row = {lane, position, redis.call("ZCARD", lane_key(lane)),
    redis.call("HGET", K_WEIGHTS, lane) or "1", redis.call("HGET", K_SERVED, lane) or "0"}
  for i = 1, 6 do row[#row + 1] = c[i] or "" end
  row[#row + 1] = c[7] and "1" or "0"
  for _, v in ipairs(row) do out[#out + 1] = v end
end
local count = 0
for i, lane in ipairs(redis.call("LRANGE", K_RING, 0, limit - 1)) do
  put(lane, i - 1)
  count = count + 1
end
-- then the other lanes with controls or counters, looking at most SCAN_BUDGET
-- fields of the controls hash (bounded work: a queue with 10^5 lanes that
-- hold delayed jobs is listed in part)
local SCAN_BUDGET = 10000
local cursor, seen = "0", 0
repeat
  if count >= limit or seen >= SCAN_BUDGET then break end
  local page = redis.call("HSCAN", K_LANECTL, cursor, "COUNT", 500)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    seen = seen + 1
    local kind, lane = string.match(page[2][i], "^(%a):(.*)$")
    if kind and kind ~= "t" and not listed[lane] and count < limit then
      put(lane, -1)
      count = count + 1
    end
  end
until cursor == "0"
local turn = redis.call("HMGET", K_TURN, "lane", "left")
return {out, {turn[1] or "", turn[2] or ""}, now_ms()}

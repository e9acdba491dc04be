-- setLane: change one lane's controls (docs/ordering.md "Lane controls").
-- Fields not given are left as they are; an empty value removes that control.
-- A parked lane that can be served after the change goes back into the ring
-- at its place (and wakes a worker); a lane in the ring that can no longer
-- be served is parked when the rotation next reaches it.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     lane ("" = the default lane)
-- ARGV[8..]   pairs of field, value:
--               w  weight (1 … 1000; "" = back to 1)
--               c  concurrency cap       r  rate "max per_ms"
--               p  "1" paused            m  max_waiting
--               t  throttle for this many ms from now (server clock; a
--                  throttle never shortens one in force; "" lifts it, with
--                  an event "unthrottled" if one was in force; the lane, parked
--                  by an idle worker's claim, goes back into the ring below and
--                  that rings the doorbell: the worker does not sleep to its end)
-- Every call records one event "lane_changed" (no job; the lane as its group).
--
-- Returns: 1
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lanes
-- @include controls

local lane = ARGV[7]
local now = now_ms()
-- read phase
read_key("EXISTS", rate_key(lane))
plan_recheck(lane)
-- write phase
META.stamp_format()
-- the lane controls' mark (includes/fixed.lua, features): kept once set, as
-- the lanes' counts and parked state it makes every call read may outlive
-- the control itself
for i = 8, #ARGV - 1, 2 do
  if ARGV[i] ~= "w" and ARGV[i + 1] ~= "" then
    META.mark("fl")
    break
  end
end
for i = 8, #ARGV - 1, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if field == "w" then
    if value == "" then
      redis.call("HDEL", K_WEIGHTS, lane)
      -- the weights' mark goes with the last weight (includes/fixed.lua, features)
      if redis.call("HLEN", K_WEIGHTS) == 0 then META.unmark("fg") end
    else
      redis.call("HSET", K_WEIGHTS, lane, value)
      META.mark("fg")
    end
  elseif field == "t" then
    if value == "" then
      local current = tonumber(redis.call("HGET", K_LANECTL, "t:" .. lane) or "0")
      redis.call("HDEL", K_LANECTL, "t:" .. lane)
      if current > now then emit("unthrottled", "", lane) end
    else
      local until_ms = now + tonumber(value)
      local current = tonumber(redis.call("HGET", K_LANECTL, "t:" .. lane) or "0")
      if until_ms > current then redis.call("HSET", K_LANECTL, "t:" .. lane, until_ms) end
    end
  else
    if value == "" then
      redis.call("HDEL", K_LANECTL, field .. ":" .. lane)
    else
      redis.call("HSET", K_LANECTL, field .. ":" .. lane, value)
    end
    -- a changed rate starts a fresh record of claim times
    if field == "r" then redis.call("DEL", rate_key(lane)) end
  end
end
emit("lane_changed", "", lane)
recheck(lane, now)
flush_events()
return 1

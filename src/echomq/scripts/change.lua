-- change: move a waiting or delayed job to another tier and/or lane, keeping
-- its arrival (composite: the counter in its score; mint: its id; aged: its
-- due time, the key less tier x age_step), so it stands where it would had it
-- been added with those options.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     new tier ("" = unchanged)
-- ARGV[9]     "1" to change the lane, else "0"
-- ARGV[10]    new lane ("" = the default lane) when ARGV[9] is "1"
--
-- Returns: the job's hash (HGETALL) after the change,
--          E_NOT_FOUND (-1) for an unknown id,
--          {E_INVALID_STATE (-6), state} when it is neither waiting nor delayed,
--          {E_LANE_FULL (-5), lane, held, 1, max_waiting} when the new lane is full.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include controls

local id = ARGV[7]
local jk = job_key(id)
-- read phase
local f = read_key("HMGET", jk, "s", "p", "g", "sc")
if not f[1] then return E_NOT_FOUND end
local state, old_tier, old_lane, old_score = f[1], tonumber(f[2]), f[3] or "", f[4]
if state ~= "waiting" and state ~= "delayed" then return {E_INVALID_STATE, state} end
local tier = ARGV[8] ~= "" and tonumber(ARGV[8]) or old_tier
local lane = old_lane
if ARGV[9] == "1" then lane = ARGV[10] end
local old_lk, new_lk = lane_key(old_lane), lane_key(lane)
local old_size = read_key("ZCARD", old_lk)
local new_size = read_key("ZCARD", new_lk)
if lane ~= old_lane then
  local c = redis.call("HMGET", K_LANECTL, "m:" .. lane, "d:" .. lane)
  local most = tonumber(c[1])
  if most and new_size + (tonumber(c[2]) or 0) + 1 > most then
    return {E_LANE_FULL, lane, new_size + (tonumber(c[2]) or 0), 1, most}
  end
end
-- write phase
if tier ~= old_tier or lane ~= old_lane then
  local fields = {"p", tier}
  if lane == "" then
    redis.call("HDEL", jk, "g")
  else
    fields[#fields + 1], fields[#fields + 2] = "g", lane
    META.mark("fj")  -- (the feature word, includes/fixed.lua)
  end
  if state == "delayed" then
    redis.call("HSET", jk, unpack(fields))
    if lane ~= old_lane then
      count_delayed(old_lane, -1)
      count_delayed(lane, 1)
    end
  else
    -- waiting: the same arrival in the new tier and lane
    local order, score = ordering(), nil
    if order == "aged" then
      -- its due time kept: the key less the old tier's part, plus the new one's
      score = fmt(aged_score(tier, tonumber(old_score) - old_tier * OPT.age_step_ms))
    else
      local arrival = 0
      if order == "composite" then arrival = tonumber(old_score) % TIER_UNIT end
      score = fmt(tier * TIER_UNIT + arrival)
    end
    fields[#fields + 1], fields[#fields + 2] = "sc", score
    redis.call("HSET", jk, unpack(fields))
    redis.call("ZREM", old_lk, id)
    waiting_delta = waiting_delta - 1
    if old_size == 1 and lane ~= old_lane then leave_ring(old_lane) end
    if lane == old_lane then
      redis.call("ZADD", old_lk, score, id)
      waiting_delta = waiting_delta + 1
    else
      enter_lane(lane, id, score)
    end
    flush_waiting()
  end
end
return redis.call("HGETALL", jk)

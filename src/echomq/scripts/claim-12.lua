-- claim: promote due jobs, return expired leases, then lease up to n jobs in
-- the order of the weighted rotation (DESIGN §3).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     n: most jobs to claim (>= 1)
-- ARGV[8]     lease_ms: lease length
--
-- Returns: a list with one entry per claimed job, in claim order:
--          {id, field1, value1, field2, value2, ...} (the job hash after the
--          claim); empty when nothing is waiting or the queue is paused.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention
-- @include time

local n, lease_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()
promote_due(now)
reap_expired(now)
if redis.call("HGET", K_META, "paused") == "1" then
  flush_waiting()
  return {}
end

local deadline = fmt(now + lease_ms)
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local turn_lane, left = turn[1], tonumber(turn[2])
local served = {}
local out = {}
for _ = 1, n do
  local lane = redis.call("LINDEX", K_RING, 0)
  if not lane then break end
  if lane ~= turn_lane or not left then
    -- a new turn: the weight is read now, so a changed weight applies from here
    turn_lane = lane
    left = tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1")
  end
  local lk = lane_key(lane)
  local id = redis.call("ZPOPMIN", lk)[1]
  left = left - 1
  served[lane] = (served[lane] or 0) + 1
  if redis.call("ZCARD", lk) == 0 then
    redis.call("LPOP", K_RING)
    served[lane] = false
    redis.call("HDEL", K_SERVED, lane)
    turn_lane, left = false, nil
  elseif left <= 0 then
    redis.call("LMOVE", K_RING, K_RING, "LEFT", "RIGHT")
    turn_lane, left = false, nil
  end
  local jk = job_key(id)
  redis.call("HINCRBY", jk, "a", 1)
  local token = redis.call("HINCRBY", jk, "cl", 1)
  redis.call("HSET", jk, "s", "active", "l", deadline, "t", token, "ca", fmt(now))
  redis.call("ZADD", K_ACTIVE, deadline, id)
  waiting_delta = waiting_delta - 1
  local h = redis.call("HGETALL", jk)
  table.insert(h, 1, id)
  out[#out + 1] = h
end

if turn_lane then
  redis.call("HSET", K_TURN, "lane", turn_lane, "left", left)
else
  redis.call("DEL", K_TURN)
end
for lane, count in pairs(served) do
  if count then redis.call("HINCRBY", K_SERVED, lane, count) end
end
flush_waiting()
return out

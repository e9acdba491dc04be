-- claim: promote due jobs, return expired leases, then lease up to n jobs in
-- the order of the weighted rotation (DESIGN §3).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     n: most jobs to claim (>= 1)
-- ARGV[8]     lease_ms: lease length
--
-- Returns: a list with one entry per claimed job, in claim order:
--          {id, field1, value1, field2, value2, ...}: the job hash, with the
--          fields the claim changed appended (a later field wins); empty when
--          nothing is waiting or the queue is paused.
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
flush_lanes()
if redis.call("HGET", K_META, "paused") == "1" then
  flush_waiting()
  return {}
end

local deadline = fmt(now + lease_ms)
local claimed_at = fmt(now)     -- kept in the job: the dashboard's claim latency reads it
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local turn_lane, left = turn[1], tonumber(turn[2])
local ring_len = redis.call("LLEN", K_RING)
local head = nil                -- the ring's head, read again only after it changes
local weight_of = {}            -- weights read once per call
local served = {}
local active = {}               -- deadline, id pairs for one ZADD
local out = {}

-- Lease one job: one read and one write of its hash.
local function lease(id)
  local jk = job_key(id)
  local h = redis.call("HGETALL", jk)
  local attempts, claims = 0, 0
  for i = 1, #h, 2 do
    if h[i] == "a" then attempts = tonumber(h[i + 1])
    elseif h[i] == "cl" then claims = tonumber(h[i + 1]) end
  end
  attempts, claims = attempts + 1, claims + 1
  local changed = {"s", "active", "a", attempts, "cl", claims, "l", deadline, "t", claims,
    "ca", claimed_at}
  redis.call("HSET", jk, unpack(changed))
  for _, v in ipairs(changed) do h[#h + 1] = tostring(v) end
  table.insert(h, 1, id)
  active[#active + 1] = deadline
  active[#active + 1] = id
  return h
end

for _ = 1, n do
  if ring_len == 0 then break end
  head = head or redis.call("LINDEX", K_RING, 0)
  local lane = head
  if lane ~= turn_lane or not left then
    -- a new turn: the weight is read now, so a changed weight applies from here
    turn_lane = lane
    if not weight_of[lane] then
      weight_of[lane] = tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1")
    end
    left = weight_of[lane]
  end
  local lk = lane_key(lane)
  local id = redis.call("ZPOPMIN", lk)[1]
  left = left - 1
  served[lane] = (served[lane] or 0) + 1
  if redis.call("EXISTS", lk) == 0 then
    redis.call("LPOP", K_RING)
    ring_len, head = ring_len - 1, nil
    served[lane] = false
    redis.call("HDEL", K_SERVED, lane)
    turn_lane, left = false, nil
  elseif left <= 0 then
    if ring_len > 1 then
      redis.call("LMOVE", K_RING, K_RING, "LEFT", "RIGHT")
      head = nil
    end
    turn_lane, left = false, nil
  end
  out[#out + 1] = lease(id)
  waiting_delta = waiting_delta - 1
end

if #active > 0 then call_chunked("ZADD", K_ACTIVE, active, 2) end
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

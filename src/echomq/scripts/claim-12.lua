-- claim: promote due jobs, return expired leases (each up to a fixed budget
-- per call, earliest first: includes/time.lua), then lease up to n jobs in
-- the order of the weighted rotation (DESIGN §3).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     n: most jobs to claim (>= 1)
-- ARGV[8]     lease_ms: lease length
--
-- Returns: {} when nothing is waiting or the queue is paused, else
--          {lease deadline (ms), claim time (ms), job1, job2, ...} in claim
--          order, each job {id, then the fields lease() reads below, in
--          that order} (Job.from_claim reads them), nil where a field is
--          unset, with the attempt and claim counts this claim set.
--
-- A lane's jobs for one turn are popped with one ZPOPMIN (the whole call's
-- share when the lane is alone in the ring): the turn bookkeeping below is
-- the same as popping them one at a time.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention
-- @include time

local n, lease_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()
-- promote due jobs and return expired leases, at most a budget of each
-- (includes/time.lua), both read before the first write
local due = read_due(now)
local expired = read_expired(now, false)
promote(due)
reap(expired, now)
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
local out = {deadline, claimed_at}

-- Lease one job: one read and one write of its hash. The fields read are
-- n d p g a m sc c e tb st k at pg cl (positions 5 and 15 are the attempt
-- and claim counts, returned as this claim sets them).
local function lease(id)
  local jk = job_key(id)
  local h = redis.call("HMGET", jk, "n", "d", "p", "g", "a", "m", "sc", "c", "e", "tb", "st",
    "k", "at", "pg", "cl")
  local attempts, claims = (tonumber(h[5]) or 0) + 1, (tonumber(h[15]) or 0) + 1
  redis.call("HSET", jk, "s", "active", "a", attempts, "cl", claims, "l", deadline,
    "ca", claimed_at)
  h[5], h[15] = attempts, claims
  table.insert(h, 1, id)
  active[#active + 1] = deadline
  active[#active + 1] = id
  out[#out + 1] = h
end

local remaining = n
while remaining > 0 and ring_len > 0 do
  head = head or redis.call("LINDEX", K_RING, 0)
  local lane = head
  -- the weight is read once per call, so a changed weight applies from the
  -- next turn on
  local weight = weight_of[lane]
  if not weight then
    weight = tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1")
    weight_of[lane] = weight
  end
  if lane ~= turn_lane or not left then turn_lane, left = lane, weight end
  local take = remaining
  if ring_len > 1 and left < take then take = left end
  local lk = lane_key(lane)
  local popped = redis.call("ZPOPMIN", lk, take)
  local got = #popped / 2
  for i = 1, #popped, 2 do lease(popped[i]) end
  remaining = remaining - got
  served[lane] = (served[lane] or 0) + got
  if got < take or redis.call("EXISTS", lk) == 0 then
    redis.call("LPOP", K_RING)
    ring_len, head = ring_len - 1, nil
    served[lane] = false
    redis.call("HDEL", K_SERVED, lane)
    turn_lane, left = false, nil
  elseif got < left then
    left = left - got           -- the turn goes on
  else
    -- the turn ran out (alone in the ring: got - left further pops made up
    -- whole turns of this lane, the last perhaps still going on)
    local beyond = (got - left) % weight
    if ring_len > 1 then
      redis.call("LMOVE", K_RING, K_RING, "LEFT", "RIGHT")
      head = nil
    end
    if ring_len == 1 and beyond > 0 then
      left = weight - beyond
    else
      turn_lane, left = false, nil
    end
  end
  waiting_delta = waiting_delta - got
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
if #out == 2 then return {} end
return out

-- position: where a waiting job stands (read-only; docs/ordering.md "Where a
-- job stands").
--
-- lane_ahead: the waiting jobs of its lane served before it (its ZRANK).
-- queue_ahead: the claims the weighted rotation makes before it, from the
-- ring's present state, assuming no adds and no control binding: with the
-- ring l1 (head) … lm, backlogs b_i, weights w_i, the head's claims left in
-- its turn a (its weight if no turn is under way), and the job at rank r of
-- lane l_k, its lane's turn that serves it is T (k = 1: 0 if r < a, else
-- 1 + (r - a) // w_1; else r // w_k); every lane before l_k has T + 1 turns
-- before that claim, every lane after it T, and a lane's turns make
-- min(b_i, its allowance) claims (a lane that empties leaves, the others keep
-- their order). So queue_ahead = r + sum over i < k of min(b_i, A_i(T + 1))
-- + sum over i > k of min(b_i, A_i(T)), A_i(n) = n * w_i (the head: a +
-- (n - 1) * w_1, 0 for n = 0). Every ring lane holds a job, so a lane whose
-- allowance is at most 1 adds it without reading its backlog: only lanes that
-- may hold fewer jobs than their allowance are read (ZCARD). With no weight
-- stored and T = 0 that is a closed form: r + min(b_1, a) + (k - 2) (LPOS
-- finds k; no lane is listed). Work: at most one ZCARD per ring lane, and
-- at most POSITION_LANES lanes.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: {lane_ahead, queue_ahead, completions, span_ms}: queue_ahead -1
--          when its lane is parked (not served until a control lets it),
--          -2 when the ring holds more than POSITION_LANES lanes (not
--          counted); completions: how many jobs completed in the last
--          RATE_WINDOW_MS (at most RATE_JOBS, the newest), span_ms: from the
--          oldest of them to now;
--          E_NOT_FOUND (-1) for an unknown id,
--          {E_INVALID_STATE (-6), state} for a job that is not waiting.
-- @include fixed
-- @include keys
-- @include clock

local POSITION_LANES = 10000
local RATE_JOBS, RATE_WINDOW_MS = 100, 600000
local CHUNK = 1000  -- weights read per HMGET (Lua's unpack limit)

local id = ARGV[7]
local f = redis.call("HMGET", job_key(id), "s", "g")
if not f[1] then return E_NOT_FOUND end
if f[1] ~= "waiting" then return {E_INVALID_STATE, f[1]} end
local lane = f[2] or ""
local rank = redis.call("ZRANK", lane_key(lane), id)
if not rank then return {E_INVALID_STATE, "waiting"} end

-- the recent completion rate (eta: echomq/position.py)
local now = now_ms()
local recent = redis.call("ZREVRANGEBYSCORE", K_COMPLETED, "+inf", now - RATE_WINDOW_MS,
  "WITHSCORES", "LIMIT", 0, RATE_JOBS)
local completions, span = #recent / 2, 0
if completions > 0 then span = now - tonumber(recent[#recent]) end

local function reply(queue_ahead) return {rank, queue_ahead, completions, span} end

local m = redis.call("LLEN", K_RING)
if m > POSITION_LANES then return reply(-2) end
local at = redis.call("LPOS", K_RING, lane)
if not at then return reply(-1) end
local k = at + 1
local head = k == 1 and lane or redis.call("LINDEX", K_RING, 0)
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local stored = redis.call("HLEN", K_WEIGHTS)
local own = redis.call("HMGET", K_WEIGHTS, head, lane)
local w_head, w_lane = tonumber(own[1]) or 1, tonumber(own[2]) or 1
local head_left = w_head
if turn[1] == head and tonumber(turn[2]) then head_left = tonumber(turn[2]) end

-- the claims lane i (its weight w) may make in its first n turns
local function allowance(i, w, n)
  if n <= 0 then return 0 end
  if i == 1 then return head_left + (n - 1) * w end
  return n * w
end
-- what lane i (name l, weight w, n turns before the job's claim) adds
local function share(i, l, w, n)
  local a = allowance(i, w, n)
  if a > 1 then a = math.min(a, redis.call("ZCARD", lane_key(l))) end
  return a
end

local T
if k == 1 then
  if rank < head_left then T = 0 else T = 1 + math.floor((rank - head_left) / w_head) end
else
  T = math.floor(rank / w_lane)
end
local ahead = rank

-- no lane has a weight and the job is served in its lane's first turn: every
-- lane before it but the head adds one claim, every lane after it none
if stored == 0 and T == 0 then
  if k > 1 then ahead = ahead + share(1, head, 1, 1) + (k - 2) end
  return reply(ahead)
end

-- else lane by lane: the ring, and the weights (all of them when there are
-- fewer stored than lanes in the ring, else those of the ring's lanes)
local ring = redis.call("LRANGE", K_RING, 0, -1)
local weights = {}
if stored <= #ring then
  local all = redis.call("HGETALL", K_WEIGHTS)
  for i = 1, #all, 2 do weights[all[i]] = tonumber(all[i + 1]) end
else
  for first = 1, #ring, CHUNK do
    local last = math.min(#ring, first + CHUNK - 1)
    local got = redis.call("HMGET", K_WEIGHTS, unpack(ring, first, last))
    for i = first, last do weights[ring[i]] = tonumber(got[i - first + 1]) end
  end
end
for i = 1, #ring do
  if i ~= k then
    local l = ring[i]
    ahead = ahead + share(i, l, weights[l] or 1, i < k and T + 1 or T)
  end
end
return reply(ahead)

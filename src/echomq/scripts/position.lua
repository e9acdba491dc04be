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
-- may hold fewer jobs than their allowance are read (ZCARD).
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
local ring = redis.call("LRANGE", K_RING, 0, -1)
local k = nil
for i = 1, #ring do
  if ring[i] == lane then k = i break end
end
if not k then return reply(-1) end

local weights = {}
for first = 1, #ring, CHUNK do
  local last = math.min(#ring, first + CHUNK - 1)
  local got = redis.call("HMGET", K_WEIGHTS, unpack(ring, first, last))
  for i = first, last do weights[i] = tonumber(got[i - first + 1]) or 1 end
end
local turn = redis.call("HMGET", K_TURN, "lane", "left")
local head_left = weights[1]
if turn[1] == ring[1] and tonumber(turn[2]) then head_left = tonumber(turn[2]) end

-- the claims lane i may make in its first n turns
local function allowance(i, n)
  if n <= 0 then return 0 end
  if i == 1 then return head_left + (n - 1) * weights[1] end
  return n * weights[i]
end

local T
if k == 1 then
  if rank < head_left then T = 0 else T = 1 + math.floor((rank - head_left) / weights[1]) end
else
  T = math.floor(rank / weights[k])
end
local ahead = rank
for i = 1, #ring do
  if i ~= k then
    local a = allowance(i, i < k and T + 1 or T)
    if a > 1 then
      a = math.min(a, redis.call("ZCARD", lane_key(ring[i])))
    end
    ahead = ahead + a
  end
end
return reply(ahead)

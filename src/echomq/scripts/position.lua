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
-- finds k; no lane is listed). Else the ring is listed (LRANGE) and summed in
-- one pass that finds l_k on the way (a lane not found is parked). Work: at
-- most one ZCARD per ring lane, and at most POSITION_LANES lanes; the listing
-- and the ZCARDs are most of a call's cost (benchmarks/position_cost.py).
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

local call = redis.call
local m = call("LLEN", K_RING)
if m > POSITION_LANES then return reply(-2) end
if m == 0 then return reply(-1) end
local head = call("LINDEX", K_RING, 0)
local turn = call("HMGET", K_TURN, "lane", "left")
local stored = call("HLEN", K_WEIGHTS)
local own = call("HMGET", K_WEIGHTS, head, lane)
local w_head, w_lane = tonumber(own[1]) or 1, tonumber(own[2]) or 1
local head_left = w_head
if turn[1] == head and tonumber(turn[2]) then head_left = tonumber(turn[2]) end

local T
if head == lane then
  if rank < head_left then T = 0 else T = 1 + math.floor((rank - head_left) / w_head) end
else
  T = math.floor(rank / w_lane)
end
local ahead = rank
local lanes = lane_key("")  -- a lane's key is this and its name

-- no lane has a weight and the job is served in its lane's first turn: the
-- head adds its claims left, every other lane before the job's one claim
if stored == 0 and T == 0 then
  if head == lane then return reply(ahead) end
  local at = call("LPOS", K_RING, lane)
  if not at then return reply(-1) end
  local a = head_left
  if a > 1 then
    local b = call("ZCARD", lanes .. head)
    if b < a then a = b end
  end
  return reply(ahead + a + (at - 1))
end

-- else lane by lane: the ring, and the weights (none read when none is
-- stored; all of them when there are fewer stored than lanes in the ring,
-- else those of the ring's lanes)
local ring = call("LRANGE", K_RING, 0, -1)
local weights = {}
if stored > 0 and stored <= m then
  local all = call("HGETALL", K_WEIGHTS)
  for i = 1, #all, 2 do weights[all[i]] = tonumber(all[i + 1]) end
elseif stored > 0 then
  for first = 1, m, CHUNK do
    local last = math.min(m, first + CHUNK - 1)
    local got = call("HMGET", K_WEIGHTS, unpack(ring, first, last))
    for i = first, last do weights[ring[i]] = tonumber(got[i - first + 1]) end
  end
end

-- one pass over the ring that finds the job's lane on the way (no LPOS; a
-- lane not found is parked): the head (T + 1 turns, the first of them its
-- claims left), then each lane's allowance, n turns of its weight: T + 1
-- before the job's lane, T after it. One tight loop: per lane a comparison,
-- a table read (none when no weight is stored) and, only where the allowance
-- is more than one claim, one ZCARD of a key built from one prefix.
local found = head == lane
if not found then
  local a = head_left + T * w_head
  if a > 1 then
    local b = call("ZCARD", lanes .. head)
    if b < a then a = b end
  end
  ahead = ahead + a
end
local n = found and T or T + 1  -- the turns of each lane until the job's lane
if n > 0 then
  for i = 2, m do
    local l = ring[i]
    if l == lane then
      found, n = true, T
      if n == 0 then break end  -- the lanes after it make no claim before it
    elseif stored == 0 then
      -- weight 1: n claims, or its backlog if smaller
      if n > 1 then
        local b = call("ZCARD", lanes .. l)
        if b < n then ahead = ahead + b else ahead = ahead + n end
      else
        ahead = ahead + n
      end
    else
      local a = n * (weights[l] or 1)
      if a > 1 then
        local b = call("ZCARD", lanes .. l)
        if b < a then a = b end
      end
      ahead = ahead + a
    end
  end
end
if not found then return reply(-1) end
return reply(ahead)

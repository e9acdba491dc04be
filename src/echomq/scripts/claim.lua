-- claim: promote due jobs, return expired leases (each at most n + 50 and a
-- fixed budget per call, earliest first: includes/time.lua), go on with a
-- renumbering of the arrival counter if one runs (includes/renumber.lua),
-- then lease up to n jobs in
-- the order of the weighted rotation (docs/design.md §3).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     n: most jobs to claim (>= 1)
-- ARGV[8]     lease_ms: lease length
--
-- Returns: {} when nothing is waiting or the queue is paused, else
--          {lease deadline (ms), claim time (ms), job1, job2, ...} in claim
--          order, each job {id, then the fields lease() reads below, in
--          that order} (Job.from_claim reads them), nil where a field is
--          unset, with the attempt and claim counts this claim set.
--          A popped job whose expiry (field x) has passed is dead, not
--          leased (up to EXPIRED_BUDGET of them per call).
--
-- A lane's jobs for one turn are popped with one ZPOPMIN (the whole call's
-- share when the lane is alone in the ring): the turn bookkeeping below is
-- the same as popping them one at a time.
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lanes
-- @include renumber
-- @include retention
-- @include time

local EXPIRED_BUDGET = 1000  -- most expired jobs one call buries on top of n
local n, lease_ms = tonumber(ARGV[7]), tonumber(ARGV[8])

-- Read before write: run the rotation below on what the lanes will hold
-- once this call's promotions and returned leases are in, without writing,
-- and read the hash of every job it would lease. A job hash that is not on
-- this server (a slot being migrated) then stops the script before anything
-- is written. Reads only; a claim that cannot be foreseen exactly (the
-- counter runs out during the promotion) skips it.
local function lane_entries(due, expired)
  local entries = {}         -- lane -> {{score, id}, ...} entering this call
  local order = {}           -- lanes in the order their first entry comes
  local function put(lane, id, score)
    lane = lane or ""
    if not entries[lane] then
      entries[lane] = {}
      order[#order + 1] = lane
    end
    local list = entries[lane]
    list[#list + 1] = {tonumber(score), id}
  end
  for i, id in ipairs(due.ids) do
    local f = due.fields[i]
    if f[1] then put(f[2], id, due.scores[i]) end
  end
  for i, id in ipairs(expired.ids) do
    local f = expired.fields[i]
    if f[1] and (tonumber(f[2]) or 0) + 1 <= OPT.max_stalls then put(f[3], id, f[4]) end
  end
  for _, list in pairs(entries) do
    table.sort(list, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  end
  return entries, order
end

-- The next ``count`` ids of a lane merged with the jobs entering it in this
-- call, from where the previous call on the same cursor stopped. A cursor is
-- {lane key, entering jobs, real entries taken, entering jobs taken}.
local function take_next(cursor, count)
  local lk, incoming = cursor[1], cursor[2]
  local real = read_key("ZRANGE", lk, cursor[3], cursor[3] + count - 1, "WITHSCORES")
  local ids, r = {}, 1
  while #ids < count do
    local p = cursor[4] + 1
    local rs, ps = real[r + 1] and tonumber(real[r + 1]), incoming[p] and incoming[p][1]
    if rs and (not ps or rs < ps or (rs == ps and real[r] < incoming[p][2])) then
      ids[#ids + 1] = real[r]
      r = r + 2
      cursor[3] = cursor[3] + 1
    elseif ps then
      ids[#ids + 1] = incoming[p][2]
      cursor[4] = p
    else
      break
    end
  end
  return ids
end

local function foresee_claim(due, expired)
  if #due.ids > 0 and not due.scores then return end
  local entries, joining = lane_entries(due, expired)
  -- the ring's first n + 1 lanes are all a claim of n can reach (each turn
  -- takes a job or drops a lane); lanes that join this call go to its tail
  local real_len = redis.call("LLEN", K_RING)
  local ring = redis.call("LRANGE", K_RING, 0, n)
  local ring_len = real_len
  for _, lane in ipairs(joining) do
    if read_key("EXISTS", lane_key(lane)) == 0 then
      ring_len = ring_len + 1
      if real_len <= n + 1 then ring[#ring + 1] = lane end
    end
  end
  local turn = redis.call("HMGET", K_TURN, "lane", "left")
  local turn_lane, left = turn[1], tonumber(turn[2])
  local taken, size, weights, cursors = {}, {}, {}, {}
  local remaining, at = n, 1
  while remaining > 0 and ring_len > 0 and ring[at] do
    local lane = ring[at]
    local lk = lane_key(lane)
    if not weights[lane] then
      weights[lane] = tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1")
      size[lane] = read_key("ZCARD", lk) + #(entries[lane] or {})
      taken[lane] = 0
      cursors[lane] = {lk, entries[lane] or {}, 0, 0}
    end
    local weight = weights[lane]
    if lane ~= turn_lane or not left then turn_lane, left = lane, weight end
    local take = remaining
    if ring_len > 1 and left < take then take = left end
    local ids = take_next(cursors[lane], take)
    for _, id in ipairs(ids) do
      if read_key("EXISTS", job_key(id)) == 0 then missing_job(id) end
    end
    local got = #ids
    taken[lane] = taken[lane] + got
    remaining = remaining - got
    at = at + 1
    if got < take or taken[lane] >= size[lane] then
      ring_len = ring_len - 1
      turn_lane, left = false, nil
    elseif got < left then
      left = left - got
      at = at - 1
    else
      local beyond = (got - left) % weight
      if ring_len > 1 then
        ring[#ring + 1] = lane
      else
        at = at - 1
      end
      if ring_len == 1 and beyond > 0 then left = weight - beyond else turn_lane, left = false, nil end
    end
  end
end
local now = now_ms()
-- promote due jobs and return expired leases, at most a budget of each
-- (includes/time.lua), both read before the first write
local due = read_due(now, claim_budget(n))
local expired = read_expired(now, false, claim_budget(n))
local renumber_step = read_renumber(#due.ids)
local paused = redis.call("HGET", K_META, "paused") == "1"
if not paused then foresee_claim(due, expired) end
apply_renumber(renumber_step)   -- first write: before any job of this call moves
promote(due)
reap(expired, now)
flush_lanes()
if paused then
  flush_waiting()
  flush_events()
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

local expired = 0

-- Lease one job: one read and one write of its hash. The fields read are
-- n d p g a m sc c e tb st k at pg cl x h si sf (positions 5 and 15 are the
-- attempt and claim counts, returned as this claim sets them). A job past
-- its expiry is dead instead; returns whether the job was leased.
local function lease(id)
  local jk = job_key(id)
  local h = redis.call("HMGET", jk, "n", "d", "p", "g", "a", "m", "sc", "c", "e", "tb", "st",
    "k", "at", "pg", "cl", "x", "h", "si", "sf")
  if h[16] and tonumber(h[16]) <= now then
    emit("expired", id, h[4])
    bury(id, now, "Expired: not started before its expiry time " .. h[16] .. " (ms, server clock)")
    expired = expired + 1
    return false
  end
  local attempts, claims = (tonumber(h[5]) or 0) + 1, (tonumber(h[15]) or 0) + 1
  redis.call("HSET", jk, "s", "active", "a", attempts, "cl", claims, "l", deadline,
    "ca", claimed_at)
  emit("claimed", id, h[4], "a", attempts)
  h[5], h[15] = attempts, claims
  table.insert(h, 1, id)
  active[#active + 1] = deadline
  active[#active + 1] = id
  out[#out + 1] = h
  return true
end

local remaining = n
while remaining > 0 and ring_len > 0 and expired < EXPIRED_BUDGET do
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
  for i = 1, #popped, 2 do
    if lease(popped[i]) then remaining = remaining - 1 end
  end
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
flush_events()
if #out == 2 then return {} end
return out

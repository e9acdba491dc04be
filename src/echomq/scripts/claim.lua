-- claim: promote due jobs, return expired leases (each at most n + 50 and a
-- fixed budget per call, earliest first: includes/time.lua), go on with a
-- renumbering of the arrival counter if one runs (includes/renumber.lua),
-- then lease up to n jobs in
-- the order of the weighted rotation (docs/design.md §3), at most what the
-- queue-wide concurrency and rate leave (includes/controls.lua).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     n: most jobs to claim (>= 1)
-- ARGV[8]     lease_ms: lease length
--
-- Returns: {} when nothing is waiting or the queue is paused;
--          {"wait", ms, now ms} when nothing could be claimed and the clock
--          alone makes something claimable at ms (a parked lane's throttle or
--          rate window, the queue-wide rate window ends); else
--          {lease deadline (ms), claim time (ms), job1, job2, ...} in claim
--          order, each job {id, then the fields lease() reads below, in
--          that order} (Job.from_claim reads them), nil where a field is
--          unset, with the attempt and claim counts this claim set; a claim
--          that leased fewer than n on a queue with lane controls or a
--          queue-wide rate ends that list with "wait", ms when the clock
--          alone makes more claimable at ms (as above), so a worker left
--          with free slots comes back then.
--          A popped job whose expiry (field x) has passed is dead, not
--          leased (up to EXPIRED_BUDGET of them per call, includes/time.lua;
--          a call that stops there with none leased and jobs left waiting
--          answers {"wait", now, now}: claim again at once).
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
-- @include controls
-- @include retention
-- @include time

local n, lease_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
local now = now_ms()
-- The job fields lease() reads below, in its order: n d p g a m sc c e tb st
-- k at pg cl x h si sf (positions 5 and 15 are the attempt and claim counts).
local LEASE_FIELDS = {"n", "d", "p", "g", "a", "m", "sc", "c", "e", "tb", "st", "k", "at", "pg",
  "cl", "x", "h", "si", "sf"}

-- Read before write: run the rotation below on what the lanes will hold
-- once this call's promotions and returned leases are in, without writing,
-- and read the hash of every job it would pop (a job past its expiry is
-- buried, not leased, as lease() does: the rotation goes on past it, and its
-- idempotency key and the dead set's pruning are read too). A job hash that
-- is not on this server (a slot being migrated) then stops the script before
-- anything is written.
-- Reads only; a claim that cannot be foreseen exactly (due jobs whose
-- arrival counters are not known without writing: past 2^31 or during a
-- renumbering, includes/lanes.lua foresee_arrivals) skips it.
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
    if f[1] and expired.stalls[i] <= OPT.max_stalls then put(f[3], id, f[4]) end
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

-- The ring as the write phase below will see it, for the simulation: the
-- real list read lazily in chunks (with the lanes this call puts back
-- spliced in after their pivots), then the lanes placed at the tail.
local sim = {}
function sim.ring()
  local r = {front = {}, back = {}, fetched = 0, real_len = redis.call("LLEN", K_RING),
    after = {}, len = 0}
  r.len = r.real_len
  return r
end

function sim.fill(r)
  if #r.front > 0 then return true end
  if r.fetched < r.real_len then
    local chunk = redis.call("LRANGE", K_RING, r.fetched, r.fetched + n)
    if r.fetched == 0 then r.head = chunk[1] end  -- the real list's head
    r.fetched = r.fetched + #chunk
    for _, lane in ipairs(chunk) do
      r.front[#r.front + 1] = lane
      for _, put in ipairs(r.after[lane] or {}) do r.front[#r.front + 1] = put end
    end
    -- the list may be shorter than LLEN said only if it changed: it cannot here
    if #chunk == 0 then r.fetched = r.real_len end
    return #r.front > 0
  end
  if #r.back == 0 then return false end
  r.front, r.back = r.back, {}
  return true
end

function sim.head(r)
  if not sim.fill(r) then return nil end
  return r.front[1]
end

function sim.pop(r)
  table.remove(r.front, 1)
  r.len = r.len - 1
end

-- Put a lane back after ``pivot`` (false: at the tail) before the rotation starts.
function sim.insert(r, lane, pivot)
  r.len = r.len + 1
  if pivot then
    for i, x in ipairs(r.back) do
      if x == pivot then
        table.insert(r.back, i + 1, lane)
        return
      end
    end
    local list = r.after[pivot] or {}
    r.after[pivot] = list
    table.insert(list, 1, lane)  -- a later put-back after the same pivot goes before
    return
  end
  r.back[#r.back + 1] = lane
end

-- Returns what it read, for the write phase to use when nothing is written
-- before it (a quiet call: see below): the ring's length, the turn, the
-- lanes' weights, sizes and gates, and the job fields lease() reads, by id.
local function foresee_claim(due, expired, woken)
  if #due.ids > 0 and not due.scores then return end
  local entries, joining = lane_entries(due, expired)
  local ring = sim.ring()
  local ring_len = ring.real_len
  for _, lane in ipairs(joining) do
    if read_key("EXISTS", lane_key(lane)) == 0 and not is_parked(lane) then
      ring.back[#ring.back + 1] = lane
      ring.len = ring.len + 1
    end
  end
  local gates = {}
  local function gate_of(lane)
    if not gates[lane] then gates[lane] = read_gate(lane) end
    return gates[lane]
  end
  -- parked lanes that get a slot back (reap) or whose time came
  local freed = {}
  for i, id in ipairs(expired.ids) do
    local f = expired.fields[i]
    if f[1] then
      local g = gate_of(f[3] or "")
      g.active = g.active - 1
      if not freed[g.lane] then
        freed[g.lane] = true
        freed[#freed + 1] = g.lane
      end
    end
  end
  for _, lane in ipairs(woken) do
    if not freed[lane] then
      freed[lane] = true
      freed[#freed + 1] = lane
    end
  end
  for _, lane in ipairs(freed) do
    if is_parked(lane) and gate_open(gate_of(lane), now) then
      sim.insert(ring, lane, unpark_pivot(lane))
    end
  end
  local turn = redis.call("HMGET", K_TURN, "lane", "left")
  local turn_lane, left = turn[1], tonumber(turn[2])
  local taken, size, weights, cursors = {}, {}, {}, {}
  local jobs = {}
  local remaining = n
  local dying = {}  -- jobs past their expiry: lease() buries them, up to EXPIRED_BUDGET
  local lost = {}   -- {lane, id} of entries whose job hash is gone (dropped below)
  while remaining > 0 and ring.len > 0 and #dying < EXPIRED_BUDGET do
    local lane = sim.head(ring)
    if not lane then break end
    local lk = lane_key(lane)
    if not weights[lane] then
      weights[lane] = tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1")
      size[lane] = read_key("ZCARD", lk) + #(entries[lane] or {})
      taken[lane] = 0
      cursors[lane] = {lk, entries[lane] or {}, 0, 0}
    end
    local g = gate_of(lane)
    if not gate_open(g, now) then
      sim.pop(ring)
      if turn_lane == lane then turn_lane, left = false, nil end
    else
      local weight = weights[lane]
      if lane ~= turn_lane or not left then turn_lane, left = lane, weight end
      local take = remaining
      if ring.len > 1 and left < take then take = left end
      if g.gated then take = 1 end
      local ids = take_next(cursors[lane], take)
      local leased = 0
      for _, id in ipairs(ids) do
        -- the fields lease() reads: the job's hash is on this node if any is set
        local h = read_key("HMGET", job_key(id), unpack(LEASE_FIELDS))
        local found = false
        for i = 1, #LEASE_FIELDS do found = found or h[i] ~= false end
        if not found then
          -- listed but its hash is gone on a stable slot (read_key confirmed
          -- it: during a migration it raised TRYAGAIN), e.g. drop() raced an
          -- add: the rotation goes on past it, the write phase drops it
          lost[#lost + 1] = {lane, id}
        elseif h[16] and tonumber(h[16]) <= now then
          -- as lease() will: buried, not leased (its idempotency key read now)
          dying[#dying + 1] = id
          if h[12] then read_key("EXISTS", idem_key(h[12])) end
        else
          leased = leased + 1
        end
        if found then jobs[id] = h end
      end
      local got = #ids
      taken[lane] = taken[lane] + got
      g.taken = g.taken + leased
      remaining = remaining - leased
      if got < take or taken[lane] >= size[lane] then
        sim.pop(ring)
        turn_lane, left = false, nil
      elseif g.gated and not gate_open(g, now) then
        sim.pop(ring)             -- parked: its turn ends
        turn_lane, left = false, nil
      elseif got < left then
        left = left - got
      else
        local beyond = (got - left) % weight
        if ring.len > 1 then
          table.remove(ring.front, 1)
          ring.back[#ring.back + 1] = lane
        end
        if ring.len == 1 and beyond > 0 then left = weight - beyond else turn_lane, left = false, nil end
      end
    end
  end
  -- the dead set's pruning as those burials will do it (one budget's worth,
  -- read once here; bury() reads it again per job: docs/lifecycle.md)
  if #dying > 0 then read_prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now, dying) end
  return {ring_len = ring_len, head = ring.head, turn = turn, weights = weights, size = size,
    gates = gates, jobs = jobs, lost = lost}
end
-- promote due jobs and return expired leases, at most a budget of each
-- (includes/time.lua), both read before the first write
local due = read_due(now, claim_budget(n))
local expired = read_expired(now, false, claim_budget(n))
local renumber_step, meta = read_renumber(#due.ids, CLAIM_RENUMBER_BUDGET)
local paused = meta[2] == "1"
-- parked lanes whose throttle or rate window has ended
local woken = redis.call("ZRANGEBYSCORE", K_LANEWAKE, "-inf", fmt(now), "LIMIT", 0, WAKE_BUDGET)
for _, lane in ipairs(woken) do plan_recheck(lane) end
-- the queue-wide limits (configure) cap this call's claims: it stops there,
-- the ring and the turn as its claims leave them (includes/controls.lua)
local asked = n
local queue_bound, queue_at
n, queue_bound, queue_at = queue_allowance(now, n, #expired.ids)
local seen = not paused and foresee_claim(due, expired, woken)
-- The job fields the simulation read, by id: lease() below reads a job's
-- hash only if the simulation did not. The writes between here and the
-- rotation change two of those fields, patched in as they are made: the
-- score of a promoted or renumbered job, the stall count of a returned one.
local known = seen and seen.jobs or {}
-- A quiet call writes nothing before its rotation (nothing due, expired,
-- woken or renumbered): the rotation then finds what the simulation read,
-- and takes it from there instead of reading it again.
if seen and #seen.lost > 0 then
  -- entries whose job is gone leave their lanes first (counted: meta "lost",
  -- the stats' totals; event "lost"); the rotation then reads the lanes afresh
  -- (the slot is stable: read_key confirmed it, every key is here)
  local dropped = 0
  for _, entry in ipairs(seen.lost) do
    if redis.call("ZREM", lane_key(entry[1]), entry[2]) == 1 then
      dropped = dropped + 1
      emit("lost", entry[2], entry[1])
    end
  end
  waiting_delta = waiting_delta - dropped
  redis.call("HINCRBY", K_META, "lost", dropped)
  seen = nil
end
if not (seen and #due.ids == 0 and #expired.ids == 0 and #woken == 0 and not renumber_step) then
  seen = nil
end
apply_renumber(renumber_step)   -- first write: before any job of this call moves
promote(due)
local freed = select(2, reap(expired, now))
for i, id in ipairs(due.ids) do
  if known[id] and due.scores then known[id][7] = due.scores[i] end
end
for i, id in ipairs(expired.ids) do
  if known[id] then known[id][11] = fmt(expired.stalls[i]) end
end
for id, score in pairs(renamed) do
  if known[id] then known[id][7] = score end
end
flush_lanes()
recheck_freed(freed, now)
for _, lane in ipairs(woken) do recheck(lane, now) end
if paused then
  flush_waiting()
  flush_events()
  return {}
end

local deadline = fmt(now + lease_ms)
local claimed_at = fmt(now)     -- kept in the job: the dashboard's claim latency reads it
local turn = seen and seen.turn or redis.call("HMGET", K_TURN, "lane", "left")
local turn_lane, left = turn[1], tonumber(turn[2])
local ring_len = seen and seen.ring_len or redis.call("LLEN", K_RING)
local head = seen and seen.head  -- the ring's head, read again only after it changes
local weight_of = seen and seen.weights or {}  -- weights read once per call
local served = {}               -- lane -> jobs popped from it (false: it left the ring)
local active = {}               -- deadline, id pairs for one ZADD
local out = {deadline, claimed_at}

local expired = 0

-- Lease one job: one read and one write of its hash. The fields read are
-- n d p g a m sc c e tb st k at pg cl x h si sf (positions 5 and 15 are the
-- attempt and claim counts, returned as this claim sets them). A job past
-- its expiry is dead instead; returns whether the job was leased.
local function lease(id)
  local jk = job_key(id)
  local h = known[id] or redis.call("HMGET", jk, unpack(LEASE_FIELDS))
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

local gates = {}
if seen then
  -- the simulation's gates as this call found them (a quiet call: no claims
  -- yet, no slot given back)
  for lane, g in pairs(seen.gates) do
    local copy = {}
    for k, v in pairs(g) do copy[k] = v end
    copy.taken = 0
    gates[lane] = copy
  end
end
local vt = false                -- the virtual tail, read when first needed
local function virtual_tail()
  if vt == false then vt = redis.call("HGET", K_LANECTL, "vt") end
  return vt
end
local remaining = n
while remaining > 0 and ring_len > 0 and expired < EXPIRED_BUDGET do
  head = head or redis.call("LINDEX", K_RING, 0)
  local lane = head
  local g = gates[lane]
  if not g then
    g = read_gate(lane)
    gates[lane] = g
  end
  local open, at = gate_open(g, now)
  if not open then
    -- paused, at its cap, throttled or over its rate: a zero-claim turn,
    -- and the lane is parked at the tail until it can be served
    vt = park(lane, at, virtual_tail())
    ring_len, head = ring_len - 1, nil
    if turn_lane == lane then turn_lane, left = false, nil end
  else
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
    if g.gated then take = 1 end  -- a controlled lane is checked before each claim
    local lk = lane_key(lane)
    local popped = redis.call("ZPOPMIN", lk, take)
    local got = #popped / 2
    for i = 1, #popped, 2 do
      if lease(popped[i]) then
        remaining = remaining - 1
        g.taken = g.taken + 1
      end
    end
    served[lane] = (served[lane] or 0) + got
    local reopen, reopen_at = true, nil
    if g.gated then reopen, reopen_at = gate_open(g, now) end
    local emptied = got < take
    if not emptied then
      -- a quiet call knows the lane's size before it: no other job entered it
      if seen and seen.size[lane] then emptied = served[lane] >= seen.size[lane]
      else emptied = redis.call("EXISTS", lk) == 0 end
    end
    if emptied then
      -- served past the end of its turn (alone in the ring, more than
      -- ``left`` popped at once), it was placed at the tail when that turn
      -- ended, as single claims do: it leaves with no lane before it, and
      -- the lanes parked after it go back at the tail (not after the lane
      -- that was the virtual tail before its turn)
      if got > left then vt = lane end
      redis.call("LPOP", K_RING)
      left_cycle(lane, virtual_tail())
      if vt == lane then vt = nil end
      ring_len, head = ring_len - 1, nil
      served[lane] = false
      redis.call("HDEL", K_SERVED, lane)
      turn_lane, left = false, nil
    elseif not reopen then
      -- it reached its cap or rate during its turn: the turn ends, parked
      vt = park(lane, reopen_at, virtual_tail())
      ring_len, head = ring_len - 1, nil
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
      vt = lane
      if ring_len == 1 and beyond > 0 then
        left = weight - beyond
      else
        turn_lane, left = false, nil
      end
    end
    waiting_delta = waiting_delta - got
  end
end

for _, g in pairs(gates) do record_claims(g, now) end
record_queue_claims(n - remaining, now)
if remaining == 0 and n < asked and ring_len > 0 then
  -- turned away by a queue-wide limit with work left: say when to try again
  if queue_bound == "c" then
    redis.call("HSET", K_LANECTL, "qc", "1")
  elseif queue_bound == "r" then
    redis.call("HSET", K_LANECTL, "qr", queue_at)
  end
end
if vt then
  redis.call("HSET", K_LANECTL, "vt", vt)
elseif vt == nil then
  redis.call("HDEL", K_LANECTL, "vt")
end
if #active > 0 then call_chunked("ZADD", K_ACTIVE, active, 2) end
if turn_lane then
  if turn_lane ~= turn[1] or left ~= tonumber(turn[2]) then
    redis.call("HSET", K_TURN, "lane", turn_lane, "left", left)
  end
elseif turn[1] or turn[2] then
  redis.call("DEL", K_TURN)
end
for lane, count in pairs(served) do
  if count then redis.call("HINCRBY", K_SERVED, lane, count) end
end
-- a lane that joined the empty ring in this call (promoted, returned) rings
-- only if work is left after this claim (includes/lanes.lua flush_waiting)
flush_waiting(ring_len > 0)
flush_events()
local leased = #out - 2
if leased < asked then
  -- fewer than asked: say when the clock alone lets a lane or the queue serve
  -- again (a parked lane's throttle or rate window, the queue-wide rate
  -- window), so a worker with free slots comes back then at the latest
  -- (worker/fetcher.py); a ring (an add, a freed slot, a resume) comes first.
  -- With some leased this is read only where lane controls or a queue-wide
  -- rate are in use (a plain queue's claim costs nothing more).
  local gated = queue_bound == "r" or #woken > 0
  for _, g in pairs(gates) do gated = gated or g.gated end
  local at = nil
  if expired >= EXPIRED_BUDGET and ring_len > 0 then
    at = now  -- stopped by EXPIRED_BUDGET with jobs left: claim again now
  elseif leased == 0 or gated then
    at = tonumber(next_lane_wake())
    if queue_bound == "r" and queue_at and (not at or queue_at < at) then at = queue_at end
  end
  if leased == 0 then
    if at then return {"wait", fmt(at), claimed_at} end
    return {}
  end
  if at then
    out[#out + 1] = "wait"
    out[#out + 1] = fmt(at)
  end
end
return out

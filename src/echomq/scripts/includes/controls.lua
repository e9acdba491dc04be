-- Lane controls (docs/ordering.md "Lane controls"): concurrency caps, rates,
-- pause, throttles, and the parking of lanes that cannot be served.
--
-- K_LANECTL fields (L is the lane name, "" the default lane):
--   c:L  concurrency cap            r:L  rate, "max per_ms"
--   p:L  "1" while paused           m:L  max_waiting
--   t:L  throttled until (ms, server clock)
--   a:L  active jobs of the lane (every path into and out of active keeps it)
--   d:L  delayed, retry-pending and blocked jobs of the lane: the jobs it holds
--        outside its list, for max_waiting (a blocked job released into the
--        lane moves to the list; one sent to dead, removed or cancelled leaves)
--   k:L  present while L is parked: its anchor, the lane just before it in
--        the ring's cyclic order when it was parked
--   vt   the virtual tail: the lane last placed at the ring's tail (joined,
--        moved there at the end of its turn, or parked)
--   np   how many lanes are parked
--   sw   the cursor of the sweep of ended throttles (maintenance)
-- K_LANEWAKE: parked lane -> the time (ms) its throttle or rate window ends.
-- K_GONE: a lane that left the ring while lanes were parked -> the lane
--   before it (so an anchor that left still leads to the right place);
--   deleted when no lane is parked.
-- rate:L (rate_key): the lane's last `max` claim times, newest first, with a
--   TTL of the window: the rate check is one LINDEX. The check compares the
--   stored time with now_ms; the TTL only cleans up. It never drops a time
--   that still counts: the key's expiry is measured from the script's start
--   (the server's time snapshot, floored to ms like now_ms, which claim.lua
--   reads first), so it is at most 1 ms before the newest time + the window,
--   and a key is gone only once the snapshot is past its expiry.
--
-- Parking. The ring list holds the lanes that can be served. A lane the
-- rotation reaches while it is paused, at its cap, throttled or over its
-- rate (or that reaches its cap or rate during its turn) is parked: it
-- leaves the list and remembers its anchor. Were it still in the list it
-- would only move from the head to the tail again and again (zero-claim
-- turns): its place in the cyclic order is right after its anchor, and it
-- stays there as the rotation goes on. When it can be served again it is
-- put back right after the nearest lane before it that is in the list
-- (following anchors of parked lanes, and K_GONE of lanes that left), so
-- the cyclic order is the one the rotation would have (docs/ordering.md).
local UNPARK_HOPS = 64     -- most anchors followed to put a lane back
local WAKE_BUDGET = 100    -- most lanes one claim takes from K_LANEWAKE

-- A lane's gate: its controls and active count, read once per call. The
-- rate list is read with read_key (read before write). gate_fields names
-- the K_LANECTL fields read, gate_from builds the gate from their values
-- (claim.lua reads them with other fields of K_LANECTL).
local function gate_fields(lane)
  return "c:" .. lane, "a:" .. lane, "p:" .. lane, "t:" .. lane, "r:" .. lane
end

-- (f nil: the gate of a lane of a queue that never set a lane control, no
-- "fl" mark, includes/fixed.lua: open, nothing read; its active count is
-- kept all the same, for a control set later)
local function gate_from(lane, f)
  if not f then return {lane = lane, active = 0, paused = false, taken = 0, gated = false} end
  local active = META.lane_counts(lane) and META.value("a:") or f[2]
  local g = {lane = lane, cap = tonumber(f[1]), active = tonumber(active) or 0,
    paused = f[3] == "1", until_ms = tonumber(f[4]), taken = 0}
  if f[5] then
    local mx, per = string.match(f[5], "^(%d+) (%d+)$")
    g.rate_max, g.rate_per, g.rkey = tonumber(mx), tonumber(per), rate_key(lane)
    read_key("EXISTS", g.rkey)
  end
  g.gated = (g.cap or g.rate_max or g.paused or g.until_ms) and true or false
  return g
end

local function read_gate(lane)
  if not META.uses("fl") then return gate_from(lane, nil) end
  return gate_from(lane, redis.call("HMGET", K_LANECTL, gate_fields(lane)))
end

-- Whether the lane may start one more claim at ``now`` (after the g.taken
-- claims this call already made from it). Else false and the time (ms) it
-- can next be served, or nil when only an event (a freed slot, a resume, a
-- changed control) can make it eligible. O(1): one LINDEX for a rate.
local function gate_open(g, now)
  if g.paused then return false, nil end
  if g.until_ms and g.until_ms > now then return false, g.until_ms end
  if g.cap and g.active + g.taken >= g.cap then return false, nil end
  if g.rate_max then
    -- the claim is allowed when the max-th most recent claim before it is
    -- at least per_ms old: every window of per_ms then holds at most max
    local k = g.taken
    if k >= g.rate_max then return false, now + g.rate_per end
    local t = redis.call("LINDEX", g.rkey, g.rate_max - k - 1)
    if t and tonumber(t) + g.rate_per > now then return false, tonumber(t) + g.rate_per end
  end
  return true
end

-- Write the claims a call made from one lane: its active count and, for a
-- rate, the claim times.
local function record_claims(g, now)
  if g.taken == 0 then return end
  if META.lane_counts(g.lane) then
    META.add("a:", g.taken)
  else
    redis.call("HINCRBY", K_LANECTL, "a:" .. g.lane, g.taken)
  end
  if g.rate_max then
    local times = {}
    for i = 1, math.min(g.taken, g.rate_max) do times[i] = now end
    redis.call("LPUSH", g.rkey, unpack(times))
    redis.call("LTRIM", g.rkey, 0, g.rate_max - 1)
    redis.call("PEXPIRE", g.rkey, g.rate_per)
  end
end

-- Give back ``count`` active slots of a lane (a job left active). A claim
-- that found the queue at its queue-wide cap (qc) is answered by ringing the
-- doorbell: a slot is free now. (qc is set only under a stored queue-wide
-- concurrency, and configure deletes it when that changes or goes.)
-- ``active``: the lane's a: count as the call read it, if it read it and
-- nothing of the call changed it since (one write instead of two).
local function give_back(lane, count, active)
  lane = lane or ""
  local field = "a:" .. lane
  if META.lane_counts(lane) then
    -- (kept at 0 rather than deleted: one field, written with the counters)
    META.put("a:", math.max(0, (tonumber(META.value("a:")) or 0) - count))
  elseif active and active > count then
    redis.call("HINCRBY", K_LANECTL, field, -count)
  elseif active or redis.call("HINCRBY", K_LANECTL, field, -count) <= 0 then
    redis.call("HDEL", K_LANECTL, field)
  end
  if OPT.concurrency and redis.call("HDEL", K_LANECTL, "qc") == 1 then ring_doorbell() end
end

-- Queue-wide limits (configure's ``concurrency`` and ``rate``: OPT.concurrency,
-- OPT.rate_max, OPT.rate_per). They cap all lanes together: a claim takes at
-- most what they leave and stops there, so the ring and the turn stay as the
-- claims it made leave them (no lane is parked for them: the next claim goes
-- on where this one stopped). The queue's active count is the active set's
-- size: every path out of active removes the job from K_ACTIVE in the same
-- script, so it cannot drift. The rate list (queue_rate_key) keeps the
-- queue's last rate_max claim times, newest first, with a TTL of the window
-- (which only cleans up, as a lane's rate list's above).
-- K_LANECTL fields:
--   qc  present while the last claim found the queue at its concurrency cap
--       with work left: the next job to leave active rings the doorbell
--   qr  the time (ms) the queue's rate window ends, while the last claim
--       found the queue over its rate with work left: maintenance counts it
--       as a fire time and rings the doorbell then

-- How many of ``n`` claims the queue-wide limits allow at ``now`` when
-- ``leaving`` active jobs leave first (this call's returned leases), then
-- which limit binds ("c", "r" or nil) and, for the rate, when it allows the
-- next claim. Reads only: at most n entries of the rate list.
local function queue_allowance(now, n, leaving)
  local allow, bound, at = n, nil, nil
  if OPT.concurrency then
    local free = OPT.concurrency - (redis.call("ZCARD", K_ACTIVE) - leaving)
    if free < allow then allow, bound = math.max(free, 0), "c" end
  end
  if OPT.rate_max and OPT.rate_per and allow > 0 then
    -- the k-th claim of this call (k from 0) may start when the claim at index
    -- rate_max - k - 1 of the list (newest first) is at least rate_per old:
    -- every window of rate_per then holds at most rate_max claims. The claims
    -- still in the window are a prefix of the list.
    local mx, per = OPT.rate_max, OPT.rate_per
    local want = math.min(allow, mx)
    local from = mx - want
    local times = read_key("LRANGE", queue_rate_key(), from, mx - 1)
    local inside = 0
    for _, t in ipairs(times) do
      if tonumber(t) + per > now then inside = inside + 1 end
    end
    local budget = want - inside
    if budget < allow then
      allow, bound = budget, "r"
      -- the next claim waits for the entry at index mx - budget - 1 to age out
      local t = times[(mx - budget - 1) - from + 1]
      at = t and tonumber(t) + per or now + per
    end
  end
  return allow, bound, at
end

-- Write ``taken`` claims against the queue-wide rate.
local function record_queue_claims(taken, now)
  if taken == 0 or not (OPT.rate_max and OPT.rate_per) then return end
  local times = {}
  for i = 1, math.min(taken, OPT.rate_max) do times[i] = now end
  local key = queue_rate_key()
  redis.call("LPUSH", key, unpack(times))
  redis.call("LTRIM", key, 0, OPT.rate_max - 1)
  redis.call("PEXPIRE", key, OPT.rate_per)
end

-- Count a lane's delayed, retry-pending and blocked jobs (for max_waiting):
-- +1 entering, -1 leaving.
local function count_delayed(lane, delta)
  local field = "d:" .. (lane or "")
  if redis.call("HINCRBY", K_LANECTL, field, delta) <= 0 then
    redis.call("HDEL", K_LANECTL, field)
  end
end

-- The lane a parked lane goes back after: the nearest lane before it in the
-- ring's cyclic order that is in the ring, or false for the ring's tail (the
-- chain of anchors came back to the lane itself: every other lane before it
-- is parked or gone). Reads only (lane keys with read_key). A claim's plan
-- (includes/rotation.lua) passes what it will have changed by then: ``back``,
-- lanes it puts back in the ring (no longer parked), and ``joined``, lanes it
-- makes (in the ring although their key does not exist yet).
local NONE = {}
local function unpark_pivot(lane, back, joined)
  back, joined = back or NONE, joined or NONE
  local x = redis.call("HGET", K_LANECTL, "k:" .. lane)
  for _ = 1, UNPARK_HOPS do
    if not x or x == lane then return false end
    local anchor = not back[x] and redis.call("HGET", K_LANECTL, "k:" .. x)
    if anchor then
      x = anchor
    elseif back[x] or joined[x] or read_key("EXISTS", lane_key(x)) == 1 then
      return x
    else
      x = redis.call("HGET", K_GONE, x)
    end
  end
  return false
end

local function is_parked(lane)
  -- (only a queue that set a lane control parks lanes: includes/fixed.lua)
  return META.uses("fl") and redis.call("HEXISTS", K_LANECTL, "k:" .. lane) == 1
end

-- Park the ring's head ``lane`` (it cannot be served): it leaves the list
-- and is anchored after the virtual tail ``vt``; ``at`` is when it can be
-- served again (nil: at an event). Returns the new virtual tail.
local function park(lane, at, vt)
  local anchor = vt or redis.call("LINDEX", K_RING, -1)
  redis.call("LPOP", K_RING)
  redis.call("HSET", K_LANECTL, "k:" .. lane, anchor or lane)
  redis.call("HINCRBY", K_LANECTL, "np", 1)
  if at then redis.call("ZADD", K_LANEWAKE, at, lane) end
  return lane
end

-- Put a parked lane back into the ring at its place (after ``pivot``, false:
-- at the tail; nil: found by unpark_pivot); wakes a worker.
local function unpark(lane, pivot)
  if pivot == nil then pivot = unpark_pivot(lane) end
  unparked(lane)
  if not pivot or redis.call("LINSERT", K_RING, "AFTER", pivot, lane) <= 0 then
    redis.call("RPUSH", K_RING, lane)
  end
  ring_doorbell()
end

-- Read phase of recheck(lane): reads what it may touch.
local function plan_recheck(lane)
  if is_parked(lane) then
    -- back in the ring, it may be the pivot of a lane rechecked after it
    read_key("EXISTS", lane_key(lane))
    read_gate(lane)
    unpark_pivot(lane)
  end
end

-- Note that parked ``lane`` can be served at ``at`` (ms). Idle workers sleep
-- until the earliest such time they were told of (a claim's retry_in, the
-- maintenance's next fire time), so a time before every other one rings the
-- doorbell: the woken worker's claim answers with it (e.g. a lane capped and
-- over its rate whose slot frees while its rate window still runs).
local function wake_lane_at(lane, at)
  local first = redis.call("ZRANGE", K_LANEWAKE, 0, 0, "WITHSCORES")
  if not first[2] or at < tonumber(first[2]) then ring_doorbell() end
  redis.call("ZADD", K_LANEWAKE, at, lane)
end

-- After a lane's active count or controls changed: a parked lane that can be
-- served now goes back into the ring; one that cannot waits for its time
-- (K_LANEWAKE) or an event. Returns whether it went back.
local function recheck(lane, now)
  if not is_parked(lane) then return false end
  local open, at = gate_open(read_gate(lane), now)
  if open then
    unpark(lane)
    return true
  end
  if at then
    wake_lane_at(lane, at)
  else
    redis.call("ZREM", K_LANEWAKE, lane)
  end
  return false
end

-- Lanes that leave. A lane's explicit controls (c:, r:, p:, m:, its weight)
-- are settings and stay until changed; its counters (a:, d:) go at zero, its
-- rate list expires after the window, its ring bookkeeping (k:, gone) goes
-- when it comes back or no lane is parked. A throttle (t:) is not a setting
-- but a moment: once it has passed it means nothing, and a lane that never
-- comes back would keep it forever. Maintenance sweeps them: each run looks
-- at about SWEEP_BUDGET fields of K_LANECTL (HSCAN from the cursor kept in
-- the field "sw") and deletes the throttles that have ended.
local SWEEP_BUDGET = 100

-- Read phase of the sweep: the fields of this step.
local function read_sweep(now)
  local cursor = redis.call("HGET", K_LANECTL, "sw") or "0"
  local reply = redis.call("HSCAN", K_LANECTL, cursor, "MATCH", "t:*", "COUNT", SWEEP_BUDGET)
  local ended, found = {}, reply[2]
  for i = 1, #found, 2 do
    if tonumber(found[i + 1]) <= now then ended[#ended + 1] = found[i] end
  end
  return {cursor = reply[1], ended = ended}
end

-- Write phase of the sweep: delete the ended throttles, keep the cursor.
-- Returns how many were deleted.
local function apply_sweep(plan)
  if #plan.ended > 0 then call_chunked("HDEL", K_LANECTL, plan.ended, 1) end
  if plan.cursor == "0" then
    redis.call("HDEL", K_LANECTL, "sw")
  else
    redis.call("HSET", K_LANECTL, "sw", plan.cursor)
  end
  return #plan.ended
end

-- The earliest time (ms) a parked lane can be served by the clock alone, or nil.
local function next_lane_wake()
  local first = redis.call("ZRANGE", K_LANEWAKE, 0, 0, "WITHSCORES")
  return first[2]
end

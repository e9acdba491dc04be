-- Waiting jobs: lanes, the ring, the waiting count and the doorbell.
--
-- Jobs entering lanes are buffered per script call and written with one ZADD
-- per lane (flush_lanes); lanes join the ring in the order their first job
-- entered, exactly as if each job had been written on its own.
local TIER_UNIT = 4294967296        -- 2^32: one tier step in the composite score
local MAX_COUNTER = 4294967295      -- 2^32 - 1: the largest arrival counter

local waiting_delta        -- per call (reset below)
local ring_filled          -- per call: a lane joined the ring while it held no lane
local REBASE_AT = 2147483648        -- 2^31: past it, the counter starts again (below)

-- A renumbering in steps (includes/renumber.lua, docs/ordering.md) keeps its
-- stage in the meta hash (rn: "scan" | "compact"; rnn: the next new counter).
-- While one runs, every job that enters a lane with a counter at or above
-- rnn (an arrival, or a job coming back that is not renumbered yet) is listed
-- in the index K_RENUMBER (id -> counter): the steps find it there whatever
-- it did meanwhile.
local renumbering         -- {stage, next} or false, read once per call (nil: not yet)
local function renumber_state()
  if renumbering == nil then
    local f = redis.call("HMGET", K_META, "rn", "rnn")
    renumbering = f[1] and {stage = f[1], next = tonumber(f[2]) or 1} or false
  end
  return renumbering
end
local renamed            -- id -> new lane score, for jobs renumbered in this call

-- The counter, id pairs of buffered lane entries that the index must list.
local function index_pairs(buf, out)
  local rn = renumber_state()
  if not rn then return out end
  for i = 1, #buf, 2 do
    local c = tonumber(buf[i]) % TIER_UNIT
    if c >= rn.next then
      out[#out + 1] = c
      out[#out + 1] = buf[i + 1]
    end
  end
  return out
end
local pending            -- lane -> {score1, id1, score2, id2, ...}
local pending_order      -- lanes in the order their first pending job entered
-- (the two tables are made once and emptied after each flush: a table made
-- per call is garbage the server's Lua collector pays for, includes/fixed.lua)
local LANES = {}
function LANES.clear_pending()
  for i = 1, #pending_order do
    pending[pending_order[i]] = nil
    pending_order[i] = nil
  end
end
-- renamed when no job was renumbered in the call: read only
LANES.NONE_RENAMED = {}

-- Put a waiting job into its lane (buffered until flush_lanes). ``lane`` is
-- the job's stored g field (absent: the default lane ""); ``score`` is the
-- lane score as the decimal text stored in its sc field.
local function enter_lane(lane, id, score)
  lane = lane or ""
  local buf = pending[lane]
  if not buf then
    buf = {}
    pending[lane] = buf
    pending_order[#pending_order + 1] = lane
  end
  local n = #buf
  buf[n + 1] = score
  buf[n + 2] = id
  waiting_delta = waiting_delta + 1
end

-- Read a lane's key once per call before the first write (read before
-- write: a lane that is not on this server stops the script here). ``seen``
-- is the call's set of lanes read so far: lane -> 1 (it existed) or 0, which
-- flush_waiting(_, seen) takes instead of reading the lane again.
local function read_lane(seen, lane)
  lane = lane or ""
  if not seen[lane] then
    seen[lane] = read_key("EXISTS", lane_key(lane))
  end
end

-- Write the buffered jobs; a lane that was empty joins the ring's tail.
-- A lane that was empty also gets its served count (0): the served hash then
-- names every lane of the ring, which a renumbering's scan walks (HSCAN).
-- A lane joining a ring that held no lane is noted (ring_filled): the ring
-- list holds only the lanes that can be served (a parked lane is out of it),
-- so that is the moment work became claimable while none was (flush_waiting
-- rings the doorbell for it). ``seen``: read_lane's table, when no lane it
-- names was written since it was read.
local function flush_lanes(seen)
  local indexed = nil
  local joined = nil
  for i = 1, #pending_order do
    local lane = pending_order[i]
    local lk = lane_key(lane)
    local was_empty = (seen and seen[lane] or redis.call("EXISTS", lk)) == 0
    call_chunked("ZADD", lk, pending[lane], 2)
    if was_empty then
      if redis.call("RPUSH", K_RING, lane) == 1 then ring_filled = true end
      redis.call("HSETNX", K_SERVED, lane, 0)
      joined = lane
    end
    if renumber_state() then indexed = index_pairs(pending[lane], indexed or {}) end
  end
  if indexed and #indexed > 0 then call_chunked("ZADD", K_RENUMBER, indexed, 2) end
  -- (the virtual tail matters only where lanes can be parked: includes/controls.lua)
  if joined and META.uses("fl") then redis.call("HSET", K_LANECTL, "vt", joined) end
  LANES.clear_pending()
end

-- Lanes that left the ring while lanes were parked, kept for the parked
-- lanes anchored after them: at most GONE_LIMIT (then a lane anchored after
-- one not kept goes back at the ring's tail); all go when no lane is parked.
local GONE_LIMIT = 10000
local function note_gone(lane, pred)
  if redis.call("HLEN", K_GONE) < GONE_LIMIT then redis.call("HSET", K_GONE, lane, pred) end
end

-- A parked lane (includes/controls.lua) is no longer parked.
local function unparked(lane)
  redis.call("HDEL", K_LANECTL, "k:" .. lane)
  redis.call("ZREM", K_LANEWAKE, lane)
  if redis.call("HINCRBY", K_LANECTL, "np", -1) <= 0 then
    redis.call("HDEL", K_LANECTL, "np")
    redis.call("DEL", K_GONE)
  end
end

-- A parked lane whose last waiting job left: it leaves the cyclic order; the
-- lanes anchored after it follow its anchor (K_GONE).
local function parked_lane_left(lane)
  local anchor = redis.call("HGET", K_LANECTL, "k:" .. lane)
  if not anchor then return end
  if redis.call("HGET", K_LANECTL, "vt") == lane then
    redis.call("HSET", K_LANECTL, "vt", anchor)
  end
  unparked(lane)
  if redis.call("HEXISTS", K_LANECTL, "np") == 1 and anchor ~= lane then
    note_gone(lane, anchor)
  end
end

-- A lane in the ring list leaves the cyclic order: while lanes are parked,
-- the lanes anchored after it follow the lane before it (``pred``; nil: read
-- from the list); the virtual tail moves back to that lane.
local function left_cycle(lane, pred)
  if not META.uses("fl") then return end  -- no parked lane, no virtual tail
  local ctl = redis.call("HMGET", K_LANECTL, "np", "vt")
  if not ctl[1] and ctl[2] ~= lane then return end
  if pred == nil then
    local pos = redis.call("LPOS", K_RING, lane)
    if pos == 0 then pred = ctl[2] elseif pos then pred = redis.call("LINDEX", K_RING, pos - 1) end
  end
  if pred == lane then pred = nil end
  if ctl[1] and pred then note_gone(lane, pred) end
  if ctl[2] == lane then
    if pred then redis.call("HSET", K_LANECTL, "vt", pred) else redis.call("HDEL", K_LANECTL, "vt") end
  end
end

-- A lane that emptied leaves the ring, its served count and (if it had it)
-- the turn; a parked lane leaves the parked lanes.
local function leave_ring(lane)
  if META.uses("fl") and redis.call("HEXISTS", K_LANECTL, "k:" .. lane) == 1 then
    parked_lane_left(lane)
  else
    left_cycle(lane, nil)
    redis.call("LREM", K_RING, 1, lane)
  end
  redis.call("HDEL", K_SERVED, lane)
  if META.lane_counts(lane) then META.put("s:", 0) end
  if redis.call("HGET", K_TURN, "lane") == lane then
    redis.call("DEL", K_TURN)
  end
end

-- Ring the doorbell: one idle worker's BLPOP returns (the list keeps at most
-- one element, so rings that nobody has heard yet coalesce).
local function ring_doorbell()
  redis.call("LPUSH", K_WAKE, "1")
  redis.call("LTRIM", K_WAKE, 0, 0)
end

-- Call before a job enters the delayed set at fire_ms: idle workers sleep
-- until the earliest fire time they know of, so a job that fires before every
-- delayed job already there rings the doorbell and the woken worker re-reads it.
local function ring_if_earliest(fire_ms)
  META.note("td", fire_ms)
  local first = redis.call("ZRANGE", K_DELAYED, 0, 0, "WITHSCORES")
  if not first[2] or tonumber(fire_ms) < tonumber(first[2]) then ring_doorbell() end
end

-- Write the lanes and the waiting count; ring the doorbell when a lane joined
-- a ring that held no lane (flush_lanes), so an idle worker wakes. The wake
-- rule (docs/lifecycle.md): a worker waits on the doorbell only after a claim
-- that emptied the ring list (every lane left was served, emptied or parked),
-- so a ring is due exactly when the list gets its first lane again, whatever
-- parked lanes (paused, capped, throttled, over a rate) still hold. A parked
-- lane coming back rings on its own (includes/controls.lua unpark).
-- ``keep_ring``: false when the caller took the work itself (a claim that
-- emptied the ring again), so no other worker is woken for nothing.
-- ``seen``: see flush_lanes.
local function flush_waiting(keep_ring, seen)
  flush_lanes(seen)
  if ring_filled and keep_ring ~= false then ring_doorbell() end
  ring_filled = false
  if waiting_delta == 0 then return end
  META.add("w", waiting_delta)
  waiting_delta = 0
end

local function ordering()
  return redis.call("HGET", K_META, "o") or "composite"
end

-- Counters reserved by reserve_arrivals and not yet handed out: next..last.
local reserved_next, reserved_last

-- This include's per-call state starts fresh at each call (includes/fixed.lua).
on_call(function()
  waiting_delta, renumbering, renamed, ring_filled = 0, nil, LANES.NONE_RENAMED, false
  if not pending then pending, pending_order = {}, {} end
  LANES.clear_pending()  -- (a call stopped by an error left its buffers)
  reserved_next, reserved_last = 1, 0
end)

-- Stop a renumbering: nothing is left to renumber (includes/renumber.lua).
local function end_renumbering()
  redis.call("UNLINK", K_RENUMBER)
  redis.call("HDEL", K_META, "rn", "rnn", "rnh", "rnl", "rnz", "rna", "rq")
  renumbering = false
end

-- Past REBASE_AT, a queue with no waiting and no active job (and none about
-- to enter a lane in this call) starts its counter again from 0: no job can
-- come back at an old score, so the order needs no renumbering (one that
-- runs stops: its index holds only jobs that are gone or wait to be promoted,
-- which take a fresh counter then).
local function rebased(cur)
  if cur <= REBASE_AT or waiting_delta ~= 0 or #pending_order > 0 then return cur end
  if tonumber(META.get("w") or "0") > 0 then return cur end
  if redis.call("ZCARD", K_ACTIVE) > 0 then return cur end
  if renumber_state() then end_renumbering() end
  return 0
end

-- The counter went past REBASE_AT: the meta mark "rq" tells read_renumber
-- (includes/renumber.lua) to look at it; until then no call reads the counter
-- to learn that it is low. Written once (later calls read the mark).
function META.note_high_counter(c)
  if c <= REBASE_AT or META.known.rq == "1" then return end
  redis.call("HSET", K_META, "rq", "1")
  if META.known.rq ~= nil then META.known.rq = "1" end
end

-- Never reached while renumberings start at 2^31 (docs/ordering.md proves
-- the counter stays below 2^32 meanwhile): refuse rather than wrap.
local function counter_exhausted()
  error({err = "ERR echomq: the arrival counter passed 2^32-1 during a renumbering"})
end

-- Take k arrival counters with one write (a batch of adds); counters that end
-- up unused leave gaps, which keep the order.
local function reserve_arrivals(k)
  local cur = rebased(tonumber(redis.call("GET", K_COUNTER) or "0"))
  if cur + k > MAX_COUNTER then counter_exhausted() end
  redis.call("SET", K_COUNTER, cur + k)
  META.note_high_counter(cur + k)
  reserved_next, reserved_last = cur + 1, cur + k
end

-- The aged ordering's key (docs/ordering.md): the job's due time (ms) plus
-- tier x age_step (ms); equal keys sort by member, the time-ordered job id.
-- At most about 2^41 + 2^21 x 2^27 < 2^49: a double holds it exactly.
local function aged_score(tier, due)
  if not due then error({err = "ERR echomq: an aged lane key needs the job's due time"}) end
  return tonumber(due) + tonumber(tier) * OPT.age_step_ms
end

-- The lane score of a job that becomes waiting now; ``due``: its due time
-- (ms), which only the aged ordering uses.
local function arrival_score(order, tier, due)
  if order == "mint" then return tier * TIER_UNIT end
  if order == "aged" then return aged_score(tier, due) end
  if reserved_next <= reserved_last then
    reserved_next = reserved_next + 1
    return tier * TIER_UNIT + reserved_next - 1
  end
  local c = redis.call("INCR", K_COUNTER)
  if c > REBASE_AT and rebased(c) == 0 then
    c = 1
    redis.call("SET", K_COUNTER, c)
  elseif c > MAX_COUNTER then
    counter_exhausted()
  end
  META.note_high_counter(c)
  return tier * TIER_UNIT + c
end

-- The lane scores the next k arrivals of this call would get, if that is
-- known without writing (mint, or a composite counter with room left, no
-- rebase due and no renumbering running), else nil. Reads only;
-- reserve_arrivals(k) then hands out exactly these.
local function foresee_arrivals(order, k)
  if order ~= "composite" then return 0 end
  local cur = tonumber(redis.call("GET", K_COUNTER) or "0")
  if cur > REBASE_AT or cur + k > MAX_COUNTER or renumber_state() then return nil end
  return cur
end

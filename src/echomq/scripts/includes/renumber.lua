-- Renumbering the arrival counter in bounded steps (docs/ordering.md, "When
-- the counter runs out"). Composite ordering only; needs includes/lanes.lua.
--
-- Once the counter is past RENUMBER_AT (2^31) and the queue is not idle, a
-- renumbering starts. Every add, claim and maintain call then does one step
-- of at most RENUMBER_BUDGET + 2 × (counters the call takes) units:
--
-- 1. scan: list every job that carries a lane score in the index K_RENUMBER
--    (id -> counter): first the lanes of the ring (HSCAN of the served hash,
--    each lane read by ZSCAN), then the active set (ZSCAN). A SCAN returns
--    every element present from its start to its end, so a job is listed
--    unless it moved meanwhile, and each move is covered: a job entering a
--    lane is listed as it enters (flush_lanes, includes/lanes.lua); a job a
--    claim takes from a lane is active, and the active set is scanned after
--    every lane; a job that finishes or is delayed carries no place any more
--    (it takes a fresh counter when it comes due, and is listed then).
-- 2. compact: take the lowest counters of the index and give those jobs the
--    new counters rnn, rnn + 1, … in that order (tier kept). A new counter is
--    never above the old one and stays below every counter not renumbered
--    yet, so no two jobs ever change order, within a lane or across lanes.
--    Jobs that left meanwhile (finished, delayed) are dropped from the index.
-- 3. When the index is empty the counter is set to the last new counter:
--    arrivals go on from there, far below 2^32.
--
-- A step reads everything it will write (job hashes, lanes) before the
-- script's first write: read_renumber in the read phase, apply_renumber
-- first in the write phase (before any job of the call moves).
local RENUMBER_BUDGET = 200
-- A claim's own step is smaller (it also leases up to n jobs): its base is
-- CLAIM_RENUMBER_BUDGET. The 2 units per counter taken keep the renumbering
-- ahead of the counter whatever the base (docs/ordering.md); adds and
-- maintenance runs do 200.
local CLAIM_RENUMBER_BUDGET = 50
local RENUMBER_AT = 2147483648   -- 2^31 (REBASE_AT)

-- Scan step: walk the served hash, the lanes it names and the active set from
-- where the last step stopped. state = {rnh, rnl, rnz, rna}: HSCAN cursor of
-- the served hash ("-" when done), lanes still to read (JSON list), ZSCAN
-- cursor of the first of them, ZSCAN cursor of the active set ("-" when done).
local function read_scan(plan, state)
  local served_cursor, lanes, lane_cursor, active_cursor =
    state[1], cjson.decode(state[2]), state[3], state[4]
  local found, work = {}, 0
  local function list(id, score)
    found[#found + 1] = tonumber(score) % TIER_UNIT
    found[#found + 1] = id
  end
  while work < plan.budget do
    local count = plan.budget - work
    if #lanes > 0 then
      local r = read_key("ZSCAN", lane_key(lanes[1]), lane_cursor, "COUNT", count)
      for i = 1, #r[2], 2 do list(r[2][i], r[2][i + 1]) end
      work = work + 1 + #r[2] / 2
      lane_cursor = r[1]
      if lane_cursor == "0" then table.remove(lanes, 1) end
    elseif served_cursor ~= "-" then
      local r = redis.call("HSCAN", K_SERVED, served_cursor, "COUNT", count)
      for i = 1, #r[2], 2 do lanes[#lanes + 1] = r[2][i] end
      work = work + 1 + #r[2] / 2
      served_cursor = r[1] == "0" and "-" or r[1]
    elseif active_cursor ~= "-" then
      local r = redis.call("ZSCAN", K_ACTIVE, active_cursor, "COUNT", count)
      for i = 1, #r[2], 2 do
        local sc = read_key("HGET", job_key(r[2][i]), "sc")
        if sc then list(r[2][i], sc) end
      end
      work = work + 1 + #r[2] / 2
      active_cursor = r[1] == "0" and "-" or r[1]
    else
      plan.scanned = true
      break
    end
  end
  plan.found = found
  plan.work = work
  plan.state = {"rnh", served_cursor, "rnl", cjson.encode(lanes), "rnz", lane_cursor,
    "rna", active_cursor}
end

-- Compaction step: the lowest index entries; a job still waiting or active
-- at that very counter gets the next new counter.
local function read_compact(plan, next_counter)
  local entries = redis.call("ZRANGE", K_RENUMBER, 0, plan.budget - 1, "WITHSCORES")
  local rewrites, lanes = {}, {}
  for i = 1, #entries, 2 do
    local id, c = entries[i], tonumber(entries[i + 1])
    local f = read_key("HMGET", job_key(id), "s", "sc", "g")
    local sc = tonumber(f[2])
    if (f[1] == "waiting" or f[1] == "active") and sc and sc % TIER_UNIT == c then
      if next_counter ~= c then
        local lane = f[1] == "waiting" and (f[3] or "")
        if lane then read_lane(lanes, lane) end
        rewrites[#rewrites + 1] = {id, fmt(sc - c + next_counter), lane}
      end
      next_counter = next_counter + 1
    end
  end
  plan.taken = #entries / 2
  plan.work = plan.taken
  plan.rewrites = rewrites
  plan.next = next_counter
  plan.finished = plan.taken >= redis.call("ZCARD", K_RENUMBER)
end

-- Read phase: plan this call's step (nil: no renumbering). ``takes`` is how
-- many arrival counters the call may take; ``base`` the step's budget before
-- them (default RENUMBER_BUDGET); ``...`` more meta fields the caller reads in
-- the same HMGET (META.read, includes/fixed.lua: its counters, then written
-- once at the end of the call). Also returns the meta hash's fields read in
-- the same HMGET, for the caller: {ordering ("o", nil for a new queue),
-- paused ("1" or nil), dr}.
local function read_renumber(takes, base, ...)
  -- the ordering (as ordering() reads it), the pause and a drop under way
  -- (dr: dropPage.lua's last page, ms; add.lua refuses then) in the same read
  -- (the step's own fields only while one runs: a field the hash lacks
  -- costs the server a walk of the whole hash)
  local state = META.fetch("rn", "o", "paused", "dr", "v", "rq", ...)
  -- {rnh, rnl, rnz, rna, rnn}: the step's cursors and next counter
  local step = state[1] and META.fetch("rnh", "rnl", "rnz", "rna", "rnn")
  -- the lanes' view of the renumbering (renumber_state, includes/lanes.lua): read here
  renumbering = step and {stage = state[1], next = tonumber(step[5]) or 1} or false
  local meta = {state[2] or nil, state[3] or nil, state[4] or nil}
  if state[2] and state[2] ~= "composite" then return nil, meta end
  local plan = {budget = (base or RENUMBER_BUDGET) + 2 * takes, stage = state[1]}
  if not plan.stage then
    -- a claim that takes no counter cannot bring it closer to 2^32: the next
    -- call that takes one (an add, a promotion) or maintenance starts it
    if takes == 0 and base == CLAIM_RENUMBER_BUDGET then return nil, meta end
    -- since format 2 the field "rq" says the counter may be past RENUMBER_AT
    -- (note_high_counter, includes/lanes.lua): a queue without it reads no counter
    if state[5] == FORMAT and not state[6] then return nil, meta end
    if tonumber(redis.call("GET", K_COUNTER) or "0") <= RENUMBER_AT then
      -- (the mark outlived a re-base: gone, so the next calls read nothing)
      if state[6] then META.clear_rq = true end  -- (written by apply_renumber)
      return nil, meta
    end
    -- an idle queue re-bases at its next arrival instead (includes/lanes.lua)
    if tonumber(redis.call("HGET", K_META, "w") or "0") <= 0
      and redis.call("ZCARD", K_ACTIVE) == 0 then return nil, meta end
    plan.start, plan.stage = true, "scan"
    step = {"0", "[]", "0", "0", "1"}
  end
  if plan.stage == "scan" then
    read_scan(plan, step)
  else
    read_compact(plan, tonumber(step[5]))
  end
  return plan, meta
end

-- Write phase, first: carry out the planned step. Returns the job hashes it
-- rewrote.
local function apply_renumber(plan)
  if META.clear_rq then redis.call("HDEL", K_META, "rq") end
  if not plan then return 0 end
  if plan.stage == "scan" then
    if plan.start then renumbering = {stage = "scan", next = 1} end
    if #plan.found > 0 then call_chunked("ZADD", K_RENUMBER, plan.found, 2) end
    if plan.scanned then
      redis.call("HDEL", K_META, "rnh", "rnl", "rnz", "rna")
      redis.call("HSET", K_META, "rn", "compact", "rnn", 1)
      renumbering = {stage = "compact", next = 1}
    else
      redis.call("HSET", K_META, "rn", "scan", "rnn", 1, unpack(plan.state))
    end
    return 0
  end
  if plan.taken > 0 then redis.call("ZREMRANGEBYRANK", K_RENUMBER, 0, plan.taken - 1) end
  for _, r in ipairs(plan.rewrites) do
    redis.call("HSET", job_key(r[1]), "sc", r[2])
    if r[3] then redis.call("ZADD", lane_key(r[3]), "XX", r[2], r[1]) end
    if renamed == LANES.NONE_RENAMED then renamed = {} end
    renamed[r[1]] = r[2]
  end
  if plan.finished then
    redis.call("SET", K_COUNTER, plan.next - 1)
    end_renumbering()
  else
    redis.call("HSET", K_META, "rnn", plan.next)
    renumbering = {stage = "compact", next = plan.next}
  end
  return #plan.rewrites
end

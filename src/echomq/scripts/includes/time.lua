-- The timed transitions that run before every claim and in maintenance:
-- due delayed jobs become waiting, expired leases come back or die.
--
-- Each call handles at most TIMED_BUDGET jobs of each kind, the earliest fire
-- time / lease deadline first, so no call runs long however many are due; the
-- next claim or maintenance run goes on where this one stopped (the due or
-- expired jobs left over are still the lowest scores of their set). A claim
-- of n handles at most n + CLAIM_EXTRA of each (what it can serve, and a
-- little more): its own cost stays in proportion to n, and maintenance
-- (TIMED_BUDGET per call, run again at once while a backlog is left) does
-- the rest. A claim handles at most 250 of each (a claim of n >= 200 does
-- work in proportion to the n it asked for).
--
-- The budgets are sized by the server CPU one call takes
-- (benchmarks/scale_latency.py): a maintenance run with every kind of
-- backlog at once does a whole budget of each (promotion, reaping, pruning
-- each set), and with 250 of each that took 7-12 ms of one core; with 100,
-- a few milliseconds.
local TIMED_BUDGET = 100
local CLAIM_EXTRA = 50
-- A claim that pops jobs past their expiry (expires=) sends them to dead
-- instead of leasing them (claim.lua), at most EXPIRED_BUDGET per call on top
-- of the n it leases: each burial costs some 10 commands (its idempotency
-- key, the dead set's pruning, an event): 1,000 took 28-57 ms of server
-- CPU in one claim(50), 100 some 4-5 ms (the server thread's own run time,
-- on a loaded 2-CPU machine).
local EXPIRED_BUDGET = 50

-- What read_due and read_expired return when they skip: made once (a table
-- made per call costs the collector), never written.
META.NO_DUE = {ids = {}, fields = {}}
META.NO_EXPIRED = {ids = {}, fields = {}, stalls = {}, dead_victims = {}}

-- What a claim reads of the delayed ("td") or the active ("tx") set
-- (META.note, includes/fixed.lua): "skip" while the clock is before the
-- queue's bound, "measure" once it is there (or not known), nil on a
-- format-1 queue (no bounds: always scanned, as before).
function META.timed_scan(mark, now)
  if META.value("v") ~= FORMAT then return nil end
  local bound = META.value(mark)
  if bound and tonumber(bound) > now then return "skip" end
  return "measure"
end

-- The members of a timed set due at ``now``, earliest first, at most
-- ``limit``; with ``bound`` "measure" also the score of the first member left
-- after them (META.NO_TIME: none), read by the same command.
function META.scan_timed(zkey, now, limit, bound)
  if bound ~= "measure" then
    return redis.call("ZRANGEBYSCORE", zkey, "-inf", fmt(now), "LIMIT", 0, limit), nil
  end
  local first = redis.call("ZRANGE", zkey, 0, limit, "WITHSCORES")
  local ids, next_at = {}, META.NO_TIME
  for i = 1, #first, 2 do
    local at = tonumber(first[i + 1])
    if #ids == limit or at > now then
      next_at = at
      break
    end
    ids[#ids + 1] = first[i]
  end
  return ids, next_at
end

-- How many due jobs / expired leases a claim of n handles (250 at most: a
-- literal, as claim.lua is near Lua's limit of 200 locals per chunk).
local function claim_budget(n)
  return math.min(250, n + CLAIM_EXTRA)
end

-- The due delayed jobs this call will promote (at most ``limit``, default
-- TIMED_BUDGET), oldest fire time first, with
-- their hashes read (read before write: nothing is written here).
-- Returns {ids, fields, scores} where fields[i] = {tier, lane} of ids[i]
-- (tier nil if the hash is gone) and scores[i] the lane score it will get
-- (scores is nil when that cannot be known before writing: see
-- foresee_arrivals).
-- ``bound`` (META.timed_scan below): "skip" reads nothing (none can be due);
-- "measure" also finds the first score left after these (plan.bound).
local function read_due(now, limit, bound)
  if bound == "skip" then return META.NO_DUE end
  local due, next_at = META.scan_timed(K_DELAYED, now, limit or TIMED_BUDGET, bound)
  local fields, lanes = {}, {}
  local order = #due > 0 and ordering()  -- read only when a job comes due
  for i, id in ipairs(due) do
    -- a hash that is gone on a stable slot (a drop() raced an add; during a
    -- migration read_key raised TRYAGAIN) is dropped by promote, counted
    local f = read_key("HMGET", job_key(id), "p", "g", "at")
    fields[i] = f
    read_lane(lanes, f[2])
  end
  local plan = {ids = due, fields = fields, order = order, bound = next_at}
  local base = #due > 0 and foresee_arrivals(order, #due)
  if base then
    plan.scores = {}
    local next_counter = base
    for i, f in ipairs(fields) do
      if f[1] and order == "aged" then
        -- due at its run time (the at field; its delayed score if absent)
        local at = tonumber(f[3]) or tonumber(redis.call("ZSCORE", K_DELAYED, due[i]))
        plan.scores[i] = fmt(aged_score(f[1], at))
      elseif f[1] then
        if order == "composite" then next_counter = next_counter + 1 end
        plan.scores[i] = fmt(tonumber(f[1]) * TIER_UNIT + next_counter)
      end
    end
    plan.counter_after = base + #due
  end
  return plan
end

-- Promote the jobs read by read_due into their lanes; returns how many.
local function promote(plan)
  local due = plan.ids
  if #due == 0 then return 0 end
  local order = plan.order
  -- the due jobs are the lowest ranks of the delayed set: one removal
  redis.call("ZREMRANGEBYRANK", K_DELAYED, 0, #due - 1)
  call_chunked("ZREM", K_RETRYING, due, 1)
  if plan.scores and order == "composite" then
    redis.call("SET", K_COUNTER, plan.counter_after)
    META.note_high_counter(plan.counter_after)
  elseif not plan.scores and order == "composite" and #due > 1 then
    reserve_arrivals(#due)
  end
  local promoted = 0
  for i, id in ipairs(due) do
    local f = plan.fields[i]
    if f[1] then
      local score = plan.scores and plan.scores[i] or fmt(arrival_score(order, tonumber(f[1]), tonumber(f[3])))
      redis.call("HSET", job_key(id), "s", "waiting", "sc", score)
      count_delayed(f[2], -1)
      enter_lane(f[2], id, score)
      promoted = promoted + 1
    else
      emit("lost", id, nil)  -- listed, its hash gone: dropped (meta "lost")
      redis.call("HINCRBY", K_META, "lost", 1)
    end
  end
  return promoted
end

-- The expired leases this call will handle, earliest deadline first, with
-- their hashes (and idempotency keys) read; nothing is written here.
-- fields[i] = {state, stalls, lane, score, idempotency key, dn, batch, and
-- with metrics on its name}, and stalls[i] the
-- stall count ids[i] has once returned (its field st + 1). The dead set's
-- pruning is planned too: always if ``prune_dead``, else only when this call
-- buries a job.
local function read_expired(now, prune_dead, limit, bound)
  if bound == "skip" then return META.NO_EXPIRED end
  local expired, next_at = META.scan_timed(K_ACTIVE, now, limit or TIMED_BUDGET, bound)
  local fields, lanes, stalls = {}, {}, {}
  local buried, freed = {}, {}
  -- a queue with metrics on counts a job that dies here (includes/metrics.lua):
  -- its name, f[8], read only then
  local counted = #expired > 0 and OPT.metrics
  for i, id in ipairs(expired) do
    -- a hash that is gone (see read_due) is dropped by reap, counted
    local f
    if counted then
      f = read_key("HMGET", job_key(id), "s", "st", "g", "sc", "k", "dn", "b", "n")
    else
      f = read_key("HMGET", job_key(id), "s", "st", "g", "sc", "k", "dn", "b")
    end
    if f[5] then read_key("EXISTS", idem_key(f[5])) end
    Batch.read(f[7])
    read_lane(lanes, f[3])
    if f[1] and not freed[f[3] or ""] then
      freed[f[3] or ""] = true
      plan_recheck(f[3] or "")
    end
    fields[i] = f
    stalls[i] = (tonumber(f[2]) or 0) + 1
    if f[1] and stalls[i] > OPT.max_stalls then
      buried[#buried + 1] = id
      if counted then Metrics.ended(f[8], 3, nil, nil, nil, now) end  -- no run: its end is not known
    end
  end
  -- the dead set's pruning, planned now for the jobs this call buries
  local victims = {}
  if prune_dead or #buried > 0 then
    victims = read_prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now, buried)
  end
  return {ids = expired, fields = fields, stalls = stalls, dead_victims = victims,
    bound = next_at}
end

-- Return the leases read by read_expired: back to waiting at the old place
-- (stalls + 1), or dead once stalls pass max_stalls; each gives its lane's
-- active slot back. Returns how many, and the lanes that got slots back
-- (recheck them once the lanes are flushed: recheck_freed).
local function reap(plan, now)
  local freed = {}
  local expired = plan.ids
  local dead_pairs = {}
  local reaped = 0
  if #expired > 0 then redis.call("ZREMRANGEBYRANK", K_ACTIVE, 0, #expired - 1) end
  for i, id in ipairs(expired) do
    local f = plan.fields[i]
    if f[1] then
      local jk = job_key(id)
      local lane = f[3] or ""
      if not freed[lane] then freed[#freed + 1] = lane end
      freed[lane] = (freed[lane] or 0) + 1
      local stalls = plan.stalls[i]
      emit("stalled", id, f[3], "st", stalls)
      if stalls > OPT.max_stalls then
        local err = "stalled: lease expired " .. stalls .. " times"
        redis.call("HSET", jk, "st", stalls, "s", "dead", "f", fmt(now), "e", err)
        emit("dead", id, f[3], "e", err)
        Dedupe.finish(f[5], id, now, OPT.keep_dead_ms)
        orphan_dependents(id, f[6], now)
        if f[7] then Batch.moved(f[7], {a = -1, d = 1}, id, now) end
        dead_pairs[#dead_pairs + 1] = fmt(now)
        dead_pairs[#dead_pairs + 1] = id
      else
        redis.call("HSET", jk, "st", stalls, "s", "waiting")
        if f[7] then Batch.moved(f[7], {a = -1}, nil, now) end
        enter_lane(f[3], id, renamed[id] or f[4])  -- renumbered in this very call?
      end
      reaped = reaped + 1
    else
      emit("lost", id, nil)  -- listed, its hash gone: dropped (meta "lost")
      redis.call("HINCRBY", K_META, "lost", 1)
    end
  end
  if #dead_pairs > 0 then call_chunked("ZADD", K_DEAD, dead_pairs, 2) end
  apply_prune(K_DEAD, plan.dead_victims)
  for i = 2, #dead_pairs, 2 do wake_waiters(dead_pairs[i], now) end
  for _, lane in ipairs(freed) do give_back(lane, freed[lane]) end
  return reaped, freed
end

-- After reap and flush_lanes: parked lanes that got a slot back and can be
-- served go back into the ring.
local function recheck_freed(freed, now)
  for _, lane in ipairs(freed) do recheck(lane, now) end
end

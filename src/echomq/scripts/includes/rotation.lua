-- The claim's weighted rotation (docs/design.md §3, docs/ordering.md),
-- written once: Rotation.plan runs it in the read phase, on what the lanes
-- and the ring will hold once the call's promotions, returned leases and
-- lanes put back are in, and reads everything it needs on the way (the ring,
-- the turn, the lanes' weights, gates and entries, the hash of every job it
-- serves); Rotation.apply then carries the plan out, step by step, without
-- deciding anything again. Needs includes/lanes.lua, controls.lua,
-- retention.lua and time.lua.
--
-- The plan, in order:
--   settle      the parked lanes rechecked (their slots given back by this
--               call's returned leases, or their time come: K_LANEWAKE):
--               {lane, back = true, pivot} goes back after ``pivot`` (false:
--               at the tail), {lane, at} waits for ``at`` (nil: an event)
--   steps       the rotation: {"park", lane, at, anchor}, {"serve", lane,
--               ids}, then for a served lane perhaps {"leave", lane, gone}
--               (it emptied; ``gone``: the lane before it, kept while lanes
--               are parked), {"park", …} (its cap or rate reached) or
--               {"rotate"} (its turn ended: head to tail)
--   jobs        id -> the fields lease() returns (LEASE_FIELDS), as read
--   turn, vt    the head lane's turn and the virtual tail after the call
--   served      lane -> jobs taken from it (false: it left the ring)
--   gates       lane -> its gate, with the claims this call makes (taken)
local Rotation = {}
Rotation.NO_BATCH = {f = {}}

-- The job fields a claim returns, in order (Job.from_claim reads them):
-- positions 5 and 15 are the attempt and claim counts (set by the claim), 7
-- the score, 11 the stalls, 12 the idempotency key, 16 the expiry, 21 the
-- batch (includes/batch.lua).
Rotation.LEASE_FIELDS = {"n", "d", "p", "g", "a", "m", "sc", "c", "e", "tb", "st", "k", "at",
  "pg", "cl", "x", "h", "si", "sf", "tg", "b"}
-- field name -> its position in LEASE_FIELDS (a numeric for: FUNCTION LOAD's
-- top level has no ipairs)
Rotation.LEASE_AT = {}
for i = 1, #Rotation.LEASE_FIELDS do Rotation.LEASE_AT[Rotation.LEASE_FIELDS[i]] = i end

-- A job's LEASE_FIELDS (false where absent; every one false: the hash is
-- gone), read with one HGETALL: an HMGET of the 21 fields walks a small
-- (listpack) hash once for every field it lacks, and a plain waiting job
-- lacks 15 of them; the whole hash (what the claim returns, a few more
-- names and stamps) costs less.
function Rotation.read_job(id)
  local flat = read_key("HGETALL", job_key(id))
  local h = {false, false, false, false, false, false, false, false, false, false, false,
    false, false, false, false, false, false, false, false, false, false}
  local at = Rotation.LEASE_AT
  for i = 1, #flat, 2 do
    local k = at[flat[i]]
    if k then h[k] = flat[i + 1] end
  end
  -- a payload in pieces (includes/text.lua) has a first piece of PIECE bytes,
  -- or up to 3 fewer where a character did not fit: only then look for more
  local first = h[2]
  if first and #first > Text.PIECE - 4 and #first <= Text.PIECE then
    local pieces = {first}
    for i = 1, #flat, 2 do
      local piece = Text.PIECE_AT[flat[i]]
      if piece and piece > 1 then pieces[piece] = flat[i + 1] end
    end
    h[2] = Text.join_payload(pieces)
  end
  return h, #flat > 0
end

-- The ring list as the write phase will see it, read lazily in chunks of
-- ``chunk`` lanes: ``front`` the part read (lanes put back after a lane
-- not read yet wait in ``after[lane]``, ``pending`` of them), then the list
-- not read yet, then ``back``, the lanes placed at the tail.
function Rotation.ring(chunk)
  local r = {front = {}, back = {}, after = {}, pending = 0, fetched = 0, done = false,
    chunk = chunk}
  Rotation.fetch(r)
  return r
end

function Rotation.splice(r, lane)
  r.front[#r.front + 1] = lane
  local list = r.after[lane]
  if list then
    r.after[lane] = nil
    r.pending = r.pending - #list
    for _, x in ipairs(list) do Rotation.splice(r, x) end
  end
end

-- Read the next chunk of the list; false when it was read to its end.
function Rotation.fetch(r)
  if r.done then return false end
  local chunk = redis.call("LRANGE", K_RING, r.fetched, r.fetched + r.chunk - 1)
  r.fetched = r.fetched + #chunk
  if #chunk < r.chunk then r.done = true end
  for _, lane in ipairs(chunk) do Rotation.splice(r, lane) end
  return #chunk > 0
end

-- Whether the ring holds more than ``k`` lanes.
function Rotation.more_than(r, k)
  while #r.front + #r.back + r.pending <= k do
    if not Rotation.fetch(r) then return false end
  end
  return true
end

function Rotation.head(r)
  while #r.front == 0 do
    if not Rotation.fetch(r) then
      if #r.back == 0 then return nil end
      r.front, r.back = r.back, {}
    end
  end
  return r.front[1]
end

-- The ring's last lane (a parked lane's anchor when no virtual tail is known).
function Rotation.tail(r)
  local last = r.back[#r.back]
  if not last then
    if r.done then last = r.front[#r.front] else last = redis.call("LINDEX", K_RING, -1) end
  end
  while last and r.after[last] and #r.after[last] > 0 do
    last = r.after[last][#r.after[last]]
  end
  return last
end

-- Put a parked lane back after ``pivot`` (false: at the tail), as LINSERT
-- AFTER (or RPUSH) will.
function Rotation.insert(r, lane, pivot)
  if pivot then
    for _, list in ipairs({r.front, r.back}) do
      for i, x in ipairs(list) do
        if x == pivot then
          table.insert(list, i + 1, lane)
          return
        end
      end
    end
    if not r.done then
      local list = r.after[pivot] or {}
      r.after[pivot] = list
      table.insert(list, 1, lane)  -- a later put-back after the same pivot goes before
      r.pending = r.pending + 1
      return
    end
  end
  r.back[#r.back + 1] = lane
end

-- The jobs entering lanes in this call (promoted, leases returned), by lane,
-- each {score, id} in lane order, and the lanes in the order their first
-- entry comes (the order flush_lanes writes them). ``scores[i]`` orders
-- ids[i] of the due jobs: the score it will get, or one that orders it the
-- same way (Rotation.due_scores).
function Rotation.entries(due, scores, expired)
  local entries, order = {}, {}
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
    if f[1] then put(f[2], id, scores[i]) end
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

-- Scores that order the due jobs as promote() will place them: the scores
-- they get when read_due could foresee them; else (past 2^31, a renumbering
-- running) the counter's next values: every counter given so far is at most
-- the counter, a re-base happens only while no job waits or is active, and a
-- renumbering keeps the order of every job, so arrivals still come after
-- every job in their tier, in their order.
function Rotation.due_scores(due)
  if due.scores or #due.ids == 0 then return due.scores or {} end
  local cur = tonumber(redis.call("GET", K_COUNTER) or "0")
  local scores = {}
  for i, f in ipairs(due.fields) do
    if f[1] then scores[i] = tonumber(f[1]) * TIER_UNIT + cur + i end
  end
  return scores
end

-- A lane's entries in lane order, merged with the jobs entering it.
function Rotation.cursor(lane, incoming, exists)
  return {key = lane_key(lane), incoming = incoming or {}, inext = 1, buf = {}, bpos = 1,
    off = 0, done = not exists}
end

-- The lane's next entry (its id, and whether it is in the lane now), not
-- taken; nil when none is left. ``want``: how many entries to read if the
-- part read is used up.
function Rotation.peek(c, want)
  if c.bpos > #c.buf and not c.done then
    c.buf = read_key("ZRANGE", c.key, c.off, c.off + want - 1, "WITHSCORES")
    c.bpos = 1
    c.off = c.off + #c.buf / 2
    if #c.buf / 2 < want then c.done = true end
  end
  local id, score, inc = c.buf[c.bpos], tonumber(c.buf[c.bpos + 1]), c.incoming[c.inext]
  if id and (not inc or score < inc[1] or (score == inc[1] and id < inc[2])) then
    return id, true
  end
  if inc then return inc[2], false end
  return nil
end

function Rotation.take(c, real)
  if real then c.bpos = c.bpos + 2 else c.inext = c.inext + 1 end
end

-- The parked lanes this call rechecks, and what happens to each (the settle
-- list above); lanes put back go into the ring model ``r``. ``p`` is the
-- plan: its gates, np, the lanes that joined.
function Rotation.settle(p, r, expired, woken, now)
  local freed, seen = {}, {}
  local function note(lane)
    if not seen[lane] then
      seen[lane] = true
      freed[#freed + 1] = lane
    end
  end
  for i, f in ipairs(expired.fields) do
    if f[1] then
      local g = Rotation.gate(p, f[3] or "")
      g.active = g.active - 1
      note(g.lane)
    end
  end
  for _, lane in ipairs(woken) do note(lane) end
  local back = {}  -- lanes this plan puts back: in the list from then on
  -- a freed lane goes back after its pivot (includes/controls.lua
  -- unpark_pivot, told the lanes put back and joined in this call)
  for _, lane in ipairs(freed) do
    if not back[lane] and is_parked(lane) then
      local open, at = gate_open(Rotation.gate(p, lane), now)
      if open then
        local pivot = unpark_pivot(lane, back, p.joined)
        Rotation.insert(r, lane, pivot)
        back[lane] = true
        p.np = p.np - 1
        p.settle[#p.settle + 1] = {lane = lane, back = true, pivot = pivot}
      else
        p.settle[#p.settle + 1] = {lane = lane, at = at}
      end
    end
  end
end

function Rotation.gate(p, lane)
  local g = p.gates[lane]
  if not g then
    g = read_gate(lane)
    p.gates[lane] = g
  end
  return g
end

function Rotation.weight(p, lane)
  local w = p.weights[lane]
  if not w then
    w = META.uses("fg") and tonumber(redis.call("HGET", K_WEIGHTS, lane) or "1") or 1
    p.weights[lane] = w
  end
  return w
end

-- Serve up to ``take`` entries of a lane: read each job's hash (a job whose
-- hash is gone, or past its expiry, takes its place in the turn and is
-- dropped or buried, not leased). Returns the ids, how many of them are
-- leased, and whether the lane holds more.
function Rotation.serve(p, c, take, now)
  local ids, leased = {}, 0
  while #ids < take do
    local id, real = Rotation.peek(c, take - #ids + 1)
    if not id then break end
    Rotation.take(c, real)
    ids[#ids + 1] = id
    local h, found = Rotation.read_job(id)
    if not found then
      -- listed, its hash gone on a stable slot (read_key confirmed it: during
      -- a migration it raised TRYAGAIN), e.g. drop() raced an add: dropped
      p.lost[id] = true
      p.dropped = p.dropped + 1
    elseif h[16] and tonumber(h[16]) <= now then
      -- past its expiry: lease() buries it (its idempotency key read now)
      p.jobs[id] = h
      p.dying[#p.dying + 1] = id
      p.dropped = p.dropped + 1
      Metrics.ended(h[1], 3, nil, nil, nil, now)  -- dead, never run (a queue with metrics on)
      if h[12] then read_key("EXISTS", idem_key(h[12])) end
      Batch.read(h[21])
    elseif h[21] and (Batch.read(h[21], true) or Rotation.NO_BATCH).f.k then
      -- a child of a batch being cancelled: lease() cancels it, it never runs
      p.jobs[id] = h
      p.dropped = p.dropped + 1
      Metrics.ended(h[1], 4, nil, nil, nil, now)  -- cancelled (a queue with metrics on)
      if h[12] then read_key("EXISTS", idem_key(h[12])) end
    else
      p.jobs[id] = h
      leased = leased + 1
    end
  end
  return ids, leased, Rotation.peek(c, 1) ~= nil
end

-- Read phase: the whole plan. ``n`` jobs at most (what the queue-wide
-- limits allow); a paused queue plans only its settle.
function Rotation.plan(due, expired, n, now, paused)
  local r = Rotation.ring(n + 1)
  local head = r.front[1]
  -- a queue that never set a lane control has no parked lane, no virtual
  -- tail and open gates: it reads none of K_LANECTL (includes/fixed.lua, features)
  local controls = META.uses("fl")
  local ctl = {}
  if controls then
    local fields = {"np", "vt"}
    if head then
      for _, f in ipairs({gate_fields(head)}) do fields[#fields + 1] = f end
    end
    ctl = redis.call("HMGET", K_LANECTL, unpack(fields))
  end
  local p = {np = tonumber(ctl[1]) or 0, vt = ctl[2] or nil, gates = {}, weights = {},
    joined = {}, settle = {}, steps = {}, jobs = {}, served = {}, lost = {}, dying = {},
    dropped = 0, woken = {}}
  if head then
    p.gates[head] = controls and gate_from(head, {ctl[3], ctl[4], ctl[5], ctl[6], ctl[7]})
      or gate_from(head, nil)
  end
  -- parked lanes whose throttle or rate window has ended (only parked lanes
  -- are listed there: none while np is absent)
  if p.np > 0 then
    p.woken = redis.call("ZRANGEBYSCORE", K_LANEWAKE, "-inf", fmt(now), "LIMIT", 0, WAKE_BUDGET)
  end
  local entries, entering = Rotation.entries(due, Rotation.due_scores(due), expired)
  local exists = {}  -- lane -> 1 or 0, as flush_lanes takes it
  for _, lane in ipairs(entering) do
    exists[lane] = read_key("EXISTS", lane_key(lane))
    if exists[lane] == 0 then
      -- an empty lane joins the tail (flush_lanes): the virtual tail
      r.back[#r.back + 1] = lane
      p.joined[lane] = true
      p.vt = lane
    end
  end
  p.exists = exists
  Rotation.settle(p, r, expired, p.woken, now)
  p.vt_before = p.vt
  if not paused then Rotation.rotate(p, r, n, now, entries, exists) end
  p.ring_left = Rotation.more_than(r, 0)
  -- the dead set's pruning as those burials will do it (one budget's worth,
  -- read once here; bury() reads it again per job: docs/lifecycle.md)
  if #p.dying > 0 then read_prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now, p.dying) end
  return p
end

-- The rotation (docs/ordering.md): the head lane is served up to its weight
-- in a row, or until it empties; a lane that cannot be served (paused, at its
-- cap, throttled, over its rate) is parked: a zero-claim turn, out of the
-- list, anchored after the virtual tail.
function Rotation.rotate(p, r, n, now, entries, exists)
  local turn = redis.call("HMGET", K_TURN, "lane", "left")
  p.turn = turn
  local turn_lane, left = turn[1], tonumber(turn[2])
  local cursors = {}
  local remaining = n
  local function park(lane, at)
    p.steps[#p.steps + 1] = {"park", lane, at, p.vt or Rotation.tail(r)}
    table.remove(r.front, 1)
    p.np = p.np + 1
    p.vt = lane
  end
  while remaining > 0 and p.dropped < EXPIRED_BUDGET do
    local lane = Rotation.head(r)
    if not lane then break end
    local g = Rotation.gate(p, lane)
    local open, at = gate_open(g, now)
    if not open then
      park(lane, at)
      if turn_lane == lane then turn_lane, left = false, nil end
    else
      -- the weight is read once per call, so a changed weight applies from
      -- the next turn on
      if lane ~= turn_lane or not left then turn_lane, left = lane, Rotation.weight(p, lane) end
      local take = remaining
      if left < take and Rotation.more_than(r, 1) then take = left end
      if g.gated then take = 1 end  -- a controlled lane is checked before each claim
      local c = cursors[lane]
      if not c then
        c = Rotation.cursor(lane, entries[lane], exists[lane] ~= 0)
        cursors[lane] = c
      end
      local ids, leased, more = Rotation.serve(p, c, take, now)
      local got = #ids
      p.steps[#p.steps + 1] = {"serve", lane, ids}
      p.served[lane] = (p.served[lane] or 0) + got
      g.taken = g.taken + leased
      remaining = remaining - leased
      local reopen, reopen_at = true, nil
      if g.gated then reopen, reopen_at = gate_open(g, now) end
      if not more then
        -- served past the end of its turn (alone in the ring, more than
        -- ``left`` taken at once), it was placed at the tail when that turn
        -- ended, as single claims do: it leaves with no lane before it
        if got > left then p.vt = lane end
        local gone = p.np > 0 and p.vt ~= lane and p.vt or nil
        p.steps[#p.steps + 1] = {"leave", lane, gone}
        if p.vt == lane then p.vt = nil end
        table.remove(r.front, 1)
        p.served[lane] = false
        turn_lane, left = false, nil
      elseif not reopen then
        park(lane, reopen_at)     -- it reached its cap or rate: its turn ends
        turn_lane, left = false, nil
      elseif got < left then
        left = left - got         -- the turn goes on
      else
        -- the turn ran out (alone in the ring: got - left further claims made
        -- up whole turns of this lane, the last perhaps still going on)
        local weight = Rotation.weight(p, lane)
        local beyond = (got - left) % weight
        local alone = not Rotation.more_than(r, 1)
        if not alone then
          p.steps[#p.steps + 1] = {"rotate"}
          r.back[#r.back + 1] = table.remove(r.front, 1)
        end
        p.vt = lane
        if alone and beyond > 0 then left = weight - beyond else turn_lane, left = false, nil end
      end
    end
  end
  p.turn_lane, p.left = turn_lane, left
end

-- Lease one job (its fields as the plan read them, ``h``): one write of its
-- hash. A job past its expiry is dead instead; returns whether it was leased.
function Rotation.lease(id, h, now, deadline, claimed_at, worker, out)
  if h[16] and tonumber(h[16]) <= now then
    emit("expired", id, h[4])
    bury(id, now, "Expired: not started before its expiry time " .. h[16] .. " (ms, server clock)")
    return false
  end
  if h[21] and Batch.seen[h[21]] then
    if Batch.seen[h[21]].f.k then
      Dedupe.finish(h[12], id, now, OPT.keep_dead_ms)  -- (its key read by the plan)
      Batch.cancel_child(id, h[21], h[4], now)
      return false
    end
    Batch.moved(h[21], {a = 1}, nil, now)
  end
  local attempts, claims = (tonumber(h[5]) or 0) + 1, (tonumber(h[15]) or 0) + 1
  -- w: the worker that claimed it ("" for a claim not made by a worker)
  redis.call("HSET", job_key(id), "s", "active", "a", attempts, "cl", claims, "l", deadline,
    "ca", claimed_at, "w", worker)
  emit("claimed", id, h[4], "a", attempts)
  h[5], h[15] = attempts, claims
  table.insert(h, 1, id)
  out[#out + 1] = h
  return true
end

-- Write phase, before the rotation: the parked lanes rechecked.
function Rotation.apply_settle(p)
  for _, s in ipairs(p.settle) do
    if s.back then
      unpark(s.lane, s.pivot)
    elseif s.at then
      wake_lane_at(s.lane, s.at)
    else
      redis.call("ZREM", K_LANEWAKE, s.lane)
    end
  end
end

-- Write phase: the rotation's steps, then the turn, the virtual tail, the
-- served counts and the lanes' claims. Appends the leased jobs' rows to
-- ``out``; returns the active set's entries (deadline, id pairs).
function Rotation.apply(p, now, deadline, claimed_at, worker, out)
  local active = {}
  for _, step in ipairs(p.steps) do
    local kind, lane = step[1], step[2]
    if kind == "serve" then
      local ids = step[3]
      if #ids > 0 then call_chunked("ZREM", lane_key(lane), ids, 1) end
      for _, id in ipairs(ids) do
        if p.lost[id] then
          emit("lost", id, lane)  -- its hash gone: dropped (meta "lost", the stats' totals)
          redis.call("HINCRBY", K_META, "lost", 1)
        elseif Rotation.lease(id, p.jobs[id], now, deadline, claimed_at, worker, out) then
          active[#active + 1] = deadline
          active[#active + 1] = id
        end
      end
      waiting_delta = waiting_delta - #ids
    elseif kind == "park" then
      park(lane, step[3], step[4])
    elseif kind == "leave" then
      redis.call("LPOP", K_RING)
      if step[3] then note_gone(lane, step[3]) end
      redis.call("HDEL", K_SERVED, lane)
      if META.lane_counts(lane) then META.put("s:", 0) end
    else
      redis.call("LMOVE", K_RING, K_RING, "LEFT", "RIGHT")
    end
  end
  for _, g in pairs(p.gates) do record_claims(g, now) end
  if p.vt ~= p.vt_before and META.uses("fl") then
    if p.vt then redis.call("HSET", K_LANECTL, "vt", p.vt) else redis.call("HDEL", K_LANECTL, "vt") end
  end
  local turn = p.turn
  if p.turn_lane then
    if p.turn_lane ~= turn[1] or p.left ~= tonumber(turn[2]) then
      redis.call("HSET", K_TURN, "lane", p.turn_lane, "left", p.left)
    end
  elseif turn[1] or turn[2] then
    redis.call("DEL", K_TURN)
  end
  for lane, count in pairs(p.served) do
    if count and META.lane_counts(lane) then
      META.add("s:", count)
    elseif count then
      redis.call("HINCRBY", K_SERVED, lane, count)
    end
  end
  return active
end

-- The whole claim (claim.lua's body; completeClaim.lua runs it after a
-- completion): up to ``n`` jobs leased for ``lease_ms`` to ``worker`` ("":
-- not a worker). Returns claim.lua's reply.
function Rotation.claim(n, lease_ms, worker)
  local now = now_ms()

  -- Read phase. Promote due jobs and return expired leases, at most a budget
  -- of each (includes/time.lua); a renumbering's step; the queue-wide limits
  -- (configure) cap this call's claims: it stops there, the ring and the turn
  -- as its claims leave them (includes/controls.lua); then the plan.
  -- Every meta field the call reads, in one HMGET (includes/fixed.lua: the
  -- counters it changes, written once at its end; the feature marks; the
  -- default lane's counts; the timed sets' bounds, with which a claim skips
  -- the scans of the delayed and active sets while nothing can be due).
  -- (a renumbering's own fields are read only while one runs: read_renumber)
  META.read("rn", "o", "paused", "dr", "rq", "w", "ev",
    "a:", "s:", "td", "tx", unpack(META.FEATURES))
  local due = read_due(now, claim_budget(n), META.timed_scan("td", now))
  local expired = read_expired(now, false, claim_budget(n), META.timed_scan("tx", now))
  local renumber_step, meta = read_renumber(#due.ids, CLAIM_RENUMBER_BUDGET, "w", "ev")
  local paused = meta[2] == "1"
  local asked = n
  local queue_bound, queue_at
  n, queue_bound, queue_at = queue_allowance(now, n, #expired.ids)
  local plan = Rotation.plan(due, expired, n, now, paused)
  -- the jobs this call ends, in the minute's metrics (a queue with them on: includes/metrics.lua)
  Metrics.read_ended(now)

  -- Write phase.
  apply_renumber(renumber_step)   -- first write: before any job of this call moves
  promote(due)
  reap(expired, now)
  Metrics.write_ended()
  -- the first fire time and lease deadline the scans left (the leases below lower it)
  if due.bound then META.put("td", fmt(due.bound)) end
  if expired.bound then META.put("tx", fmt(expired.bound)) end
  -- The job fields the plan read change with these writes: the score of a
  -- promoted or renumbered job, the stall count of a returned one.
  local jobs = plan.jobs
  for i, id in ipairs(due.ids) do
    if jobs[id] then
      jobs[id][7] = due.scores and due.scores[i] or redis.call("HGET", job_key(id), "sc")
    end
  end
  for i, id in ipairs(expired.ids) do
    if jobs[id] then jobs[id][11] = fmt(expired.stalls[i]) end
  end
  for id, score in pairs(renamed) do
    if jobs[id] then jobs[id][7] = score end
  end
  flush_lanes(plan.exists)
  Rotation.apply_settle(plan)
  if paused then
    flush_waiting()
    flush_events()
    return {}
  end

  local deadline = fmt(now + lease_ms)
  local claimed_at = fmt(now)     -- kept in the job: the dashboard's claim latency reads it
  local out = {deadline, claimed_at}
  local active = Rotation.apply(plan, now, deadline, claimed_at, worker, out)
  local leased = #out - 2
  record_queue_claims(leased, now)
  if leased == n and n < asked and plan.ring_left then
    -- turned away by a queue-wide limit with work left: say when to try again
    if queue_bound == "c" then
      redis.call("HSET", K_LANECTL, "qc", "1")
    elseif queue_bound == "r" then
      redis.call("HSET", K_LANECTL, "qr", queue_at)
    end
  end
  if #active > 0 then
    call_chunked("ZADD", K_ACTIVE, active, 2)
    META.note("tx", deadline)
  end
  -- a lane that joined the empty ring in this call (promoted, returned) rings
  -- only if work is left after this claim (includes/lanes.lua flush_waiting)
  flush_waiting(plan.ring_left)
  flush_events()
  if leased < asked then
    -- fewer than asked: say when the clock alone lets a lane or the queue serve
    -- again (a parked lane's throttle or rate window, the queue-wide rate
    -- window), so a worker with free slots comes back then at the latest
    -- (worker/fetcher.py); a ring (an add, a freed slot, a resume) comes first.
    -- With some leased this is read only where lane controls or a queue-wide
    -- rate are in use (a plain queue's claim costs nothing more); the lanes'
    -- times are read only while a lane is parked (K_LANEWAKE lists only those).
    local gated = queue_bound == "r" or #plan.woken > 0
    for _, g in pairs(plan.gates) do gated = gated or g.gated end
    local at = nil
    if plan.dropped >= EXPIRED_BUDGET and plan.ring_left then
      at = now  -- stopped by EXPIRED_BUDGET with jobs left: claim again now
    elseif leased == 0 or gated then
      if plan.np > 0 then at = tonumber(next_lane_wake()) end
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
end

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
-- ARGV[9]     the claiming worker's id, kept as the job's field w ("" or
--             absent: not a worker; written by the HSET the lease makes anyway)
--
-- Returns: {} when nothing is waiting or the queue is paused;
--          {"wait", ms, now ms} when nothing could be claimed and the clock
--          alone makes something claimable at ms (a parked lane's throttle or
--          rate window, the queue-wide rate window ends); else
--          {lease deadline (ms), claim time (ms), job1, job2, ...} in claim
--          order, each job {id, then the fields Rotation.LEASE_FIELDS names
--          (includes/rotation.lua), in that order} (Job.from_claim reads
--          them), nil where a field is
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
-- The read phase plans the whole call (includes/rotation.lua: the lanes
-- served and how many jobs each, parks, ring moves, the final turn and
-- virtual tail, every job read), the write phase applies the plan; the
-- rotation is written once, in Rotation.rotate. A job listed in a lane whose
-- hash is gone (a drop() raced an add, on a stable slot) takes its place in
-- the turn as a buried one does, and is dropped (event and meta "lost").
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lanes
-- @include renumber
-- @include controls
-- @include batch
-- @include tags
-- @include dedupe
-- @include logs
-- @include metrics
-- @include retention
-- @include time
-- @include rotation

local n, lease_ms = tonumber(ARGV[7]), tonumber(ARGV[8])
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
local active = Rotation.apply(plan, now, deadline, claimed_at, ARGV[9] or "", out)
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

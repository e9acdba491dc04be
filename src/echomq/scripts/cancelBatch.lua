-- cancelBatch: one step of cancel_batch. The first step marks the batch
-- cancelled (no callback fires from then on, no child is added, and a claim
-- that meets a child not yet cancelled cancels it instead of running it:
-- includes/rotation.lua); each step then takes one page of children: those
-- not started (waiting, delayed, retry pending, blocked) end "cancelled"
-- (they never run), running ones are cancelled as cancel() does (taken from
-- their worker, dead); finished ones stay as they are. A queue with metrics
-- on counts them (includes/metrics.lua): cancelled, and dead with their runs.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the batch id
-- ARGV[8]     the page's first place in the batch's children (rank, from 0)
-- ARGV[9]     the page size (children handled by this call at most)
--
-- Returns: {next rank or -1 when every child was handled, cancelled by this
--          call, stopped by this call}, "finished" when the batch had
--          succeeded or failed before any cancel (nothing changes), or
--          E_NOT_FOUND (-1) for no such batch.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include batch
-- @include tags
-- @include dedupe
-- @include logs
-- @include metrics
-- @include retention

local id, first, size = ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local now = now_ms()
-- read phase: the batch, a page of children and what each one's cancel touches
local b = Batch.read(id)
if not b then return E_NOT_FOUND end
local state = Batch.state(b)
if state == "succeeded" or state == "failed" then return "finished" end
local page = read_key("ZRANGE", Batch.jobs_key(id), first, first + size - 1)
local plans, lane_left, quiet = {}, {}, {}
-- (the fields the metrics count only where they are counted: f[6..9])
local counted = OPT.metrics
for _, child in ipairs(page) do
  local f
  if counted then
    f = read_key("HMGET", job_key(child), "s", "g", "k", "dn", "cl", "n", "c", "at", "ca")
  else
    f = read_key("HMGET", job_key(child), "s", "g", "k", "dn", "cl")
  end
  local s, lane = f[1], f[2] or ""
  if s == "waiting" and lane_left[lane] == nil then
    lane_left[lane] = read_key("ZCARD", lane_key(lane))
  end
  if s == "active" then
    plan_recheck(lane)
    plans[#plans + 1] = {id = child, f = f, burial = bury(child, now)}  -- reads only
    if counted then Metrics.ended(f[6], 3, f[7], f[8], f[9], now) end
  elseif s == "waiting" or s == "delayed" or s == "failed" or s == "blocked" then
    -- its Dedupe record (includes/dedupe.lua), finished as a dead job's
    local record = f[3] and read_key("GET", idem_key(f[3]))
    plans[#plans + 1] = {id = child, f = f, record = record}
    quiet[#quiet + 1] = child
    if counted then Metrics.ended(f[6], 4, nil, nil, nil, now) end
  end
end
local victims = read_prune(K_CANCELLED, OPT.keep_dead_ms, OPT.keep_dead, now, quiet)
Metrics.read_ended(now)
-- write phase
if not b.f.k then
  b.f.k = "1"
  redis.call("HSET", Batch.key(id), "k", "1")
  emit("batch_cancelled", id, nil)
  Batch.release(b, "!" .. id, now)  -- jobs that depend on it go dead
end
local cancelled, stopped = 0, 0
for _, plan in ipairs(plans) do
  local child, f = plan.id, plan.f
  local s, lane = f[1], f[2] or ""
  if s == "active" then
    redis.call("ZREM", K_ACTIVE, child)
    give_back(lane, 1)
    recheck(lane, now)
    redis.call("HSET", job_key(child), "cx", f[5] or "")  -- its heartbeat hears E_CANCELLED
    emit("cancelled", child, lane)
    bury(child, now, "Cancelled: its batch " .. id .. " was cancelled while it ran", plan.burial)
    stopped = stopped + 1
  else
    if s == "waiting" then
      if redis.call("ZREM", lane_key(lane), child) == 1 then
        waiting_delta = waiting_delta - 1
        lane_left[lane] = lane_left[lane] - 1
        if lane_left[lane] == 0 then leave_ring(lane) end
      end
    else
      count_delayed(lane, -1)
      redis.call("ZREM", K_DELAYED, child)
      redis.call("ZREM", K_RETRYING, child)
      redis.call("ZREM", K_BLOCKED, child)
    end
    Dedupe.finish(f[3], child, now, OPT.keep_dead_ms, plan.record)
    Batch.cancel_child(child, id, lane, now)
    orphan_dependents(child, f[4], now)
    cancelled = cancelled + 1
  end
end
apply_prune(K_CANCELLED, victims)
Metrics.write_ended()
local next_rank = -1
if #page == size then next_rank = first + size else Batch.expire(b) end
flush_waiting()
flush_events()
return {next_rank, cancelled, stopped}

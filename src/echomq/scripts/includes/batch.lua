-- Batches (echomq/batches.py, DESIGN §10 "Batches", docs/lifecycle.md).
--
-- A batch is one hash, Batch.key(id) = PREFIX .. "batch:" .. id, holding its
-- counters and its callbacks, so its status is one read (O(1)):
--   t   children added          a   children active now
--   c   children completed      d   children dead
--   x   children cancelled (cancel_batch: never ran)
--   n   children finished so far (as_completed's sequence, Batch.done_key)
--   cl  "1" once closed         k   "1" once cancelled
--   ca  created at (ms)         e   the last outcome announced: "s" | "f"
--   dn  "1" when a job depends_on the batch (released like a job's dependents)
--   os, oc, od   the on_success / on_complete / on_death callback: a job (JSON
--                array [id, name, data, tier, lane, delay_ms, max_attempts],
--                its id minted when the batch was made)
--   fs, fc, fd   that callback's job id once it was added (fired: never again)
-- Batch.jobs_key(id): zset child id -> its place in the batch (cancel_batch's
-- pages); Batch.done_key(id): zset child id -> n when it first finished
-- (as_completed, resumable by n).
--
-- A child carries its batch id in its field b. Every script that moves a
-- child between the states the batch counts calls Batch.moved in its write
-- phase, having called Batch.read in its read phase (read before write:
-- Batch.read reads the batch hash and, unless the caller finishes no child,
-- its done set and the job key of each callback that may fire).
-- A callback becomes due in the script of the transition that makes it due
-- (Batch.settle), in the same atomic step, and never before the batch is
-- closed: on_death at the first death, on_complete when every child has
-- completed or died, on_success when every child has completed. Its fired
-- flag (fs, fc, fd) is written in that same step, so it is added exactly
-- once whatever happens next (a revived child that finishes again). A
-- callback job is added delayed and due at once (plus its delay): the next
-- claim promotes it (K_DELAYED is a fixed key: no lane to read first); its
-- field b is "^" and the batch id (job.batch): it is no child of the batch.
-- A queue whose jobs carry no b field runs none of this (DESIGN §9).
--
-- The queue's batches are listed in one index, Batch.index() = PREFIX ..
-- "batches": zset batch id -> its creation time (ms), written by
-- createBatch.lua (listBatches.lua pages it, newest first). A batch's keys go
-- by expiry (Batch.expire), so no script sees them go and none can take the
-- entry out then: each createBatch.lua call sweeps the index instead,
-- Batch.SWEEP entries a call, oldest first from where the last call stopped
-- (the meta hash's "bs": "<created ms> <id>" of the last entry looked at;
-- absent: from the oldest), and removes those whose hash is gone. Each call
-- adds one entry and looks at SWEEP > 1, so the sweep goes round the index
-- again and again and the entries of batches gone stay a fraction of it;
-- listBatches.lua skips them meanwhile. Only createBatch.lua touches the
-- index: a queue that makes no batch has none (DESIGN §9).
local Batch = {}
-- Batch.seen: batch id -> what this call read of it (false: no such batch);
-- made afresh only after a call that read a batch (a table made per call is
-- garbage the server's Lua collector pays for)
Batch.seen = {}
on_call(function() if next(Batch.seen) ~= nil then Batch.seen = {} end end)

Batch.MAX_CHILDREN = 100000
Batch.SWEEP = 3  -- index entries each createBatch.lua call looks at (bounded work)
-- the callbacks' job specs in a batch's hash (listBatches.lua reads around them)
Batch.SPECS = {os = true, oc = true, od = true}

function Batch.key(id) return PREFIX .. "batch:" .. id end
function Batch.jobs_key(id) return PREFIX .. "batch:" .. id .. ":jobs" end
function Batch.done_key(id) return PREFIX .. "batch:" .. id .. ":done" end
function Batch.index() return PREFIX .. "batches" end
function Batch.is_id(id) return string.sub(id, 1, 4) == "bat_" end

-- A batch as listBatches.lua and peekBatch.lua return it (read-only): {id,
-- field1, value1, ...}, its hash without the callbacks' job specs (their data
-- may be large): a callback given is its field (os, oc, od) with the value
-- "1". Two reads of a hash of a few fields (HKEYS, HMGET); nil when it is gone.
function Batch.summary(id)
  local key = Batch.key(id)
  local names = redis.call("HKEYS", key)
  if #names == 0 then return nil end
  local row, wanted = {id}, {}
  for _, name in ipairs(names) do
    if Batch.SPECS[name] then
      row[#row + 1], row[#row + 2] = name, "1"
    else
      wanted[#wanted + 1] = name
    end
  end
  if #wanted > 0 then
    local values = redis.call("HMGET", key, unpack(wanted))
    for j, name in ipairs(wanted) do
      if values[j] then row[#row + 1], row[#row + 2] = name, values[j] end
    end
  end
  return row
end

-- Read phase of createBatch.lua: the next Batch.SWEEP index entries after the
-- sweep's position ``position`` (nil: from the oldest) and which of them are
-- gone (``meta_exists``: the meta hash is known to exist, key_exists's hint).
-- Returns the plan Batch.apply_sweep carries out: the entries to remove and
-- the position to keep (nil: the sweep reached the end and starts again).
function Batch.read_sweep(position, meta_exists)
  local index = Batch.index()
  local plan = {gone = {}, had = position ~= nil}
  if read_key("ZCARD", index) == 0 then return plan end
  local start = 0
  local at, after = nil, nil
  if position then at, after = Paging.parse(position) end
  if at then start = Paging.start(index, at, after, false) end
  local rows = redis.call("ZRANGE", index, start, start + Batch.SWEEP - 1, "WITHSCORES")
  for i = 1, #rows, 2 do
    if not key_exists(Batch.key(rows[i]), meta_exists) then plan.gone[#plan.gone + 1] = rows[i] end
  end
  if #rows == 2 * Batch.SWEEP then plan.position = rows[#rows] .. " " .. rows[#rows - 1] end
  return plan
end

-- Write phase of createBatch.lua: the new batch ``id`` joins the index (made
-- at ``now``), the entries of batches gone leave it, the sweep's position is kept.
function Batch.apply_sweep(plan, id, now)
  local index = Batch.index()
  if #plan.gone > 0 then redis.call("ZREM", index, unpack(plan.gone)) end
  redis.call("ZADD", index, fmt(now), id)
  if plan.position then
    redis.call("HSET", K_META, "bs", plan.position)
  elseif plan.had then
    redis.call("HDEL", K_META, "bs")
  end
end

-- Read phase: the batch ``id`` (nil: no batch, or none by that id), read once
-- per call; with it what a child's finish touches (its done set and, once the
-- batch is closed, the callbacks' job keys: Batch.read_finish). ``light``: the
-- caller moves no child to a finish (an add, a claim): the batch's hash only.
function Batch.read(id, light)
  if not id or id == "" or string.sub(id, 1, 1) == "^" then return nil end
  local b = Batch.seen[id]
  if b == nil then
    local raw = read_key("HGETALL", Batch.key(id))
    if #raw == 0 then
      Batch.seen[id] = false
      return nil
    end
    b = {id = id, f = {}, cb = {}}
    for i = 1, #raw, 2 do b.f[raw[i]] = raw[i + 1] end
    Batch.seen[id] = b
  end
  if not b then return nil end
  if not light then Batch.read_finish(b) end
  return b
end

-- Read what a finish touches: the done set, and the callbacks that may fire
-- (closed, not cancelled); closeBatch.lua reads them itself (Batch.read_callbacks).
function Batch.read_finish(b)
  if b.finish_read then return end
  b.finish_read = true
  read_key("EXISTS", Batch.done_key(b.id))
  if b.f.cl and not b.f.k then Batch.read_callbacks(b) end
end

-- The callbacks not fired yet, and their job keys (new ids: read before write).
function Batch.read_callbacks(b)
  for _, w in ipairs({"s", "c", "d"}) do
    if b.f["o" .. w] and not b.f["f" .. w] and not b.cb[w] then
      b.cb[w] = cjson.decode(b.f["o" .. w])
      read_key("EXISTS", job_key(b.cb[w][1]))
    end
  end
end

function Batch.num(b, field) return tonumber(b.f[field]) or 0 end

-- The batch's state as batch_status names it.
function Batch.state(b)
  if b.f.k then return "cancelled" end
  if not b.f.cl then return "open" end
  local t, c, d = Batch.num(b, "t"), Batch.num(b, "c"), Batch.num(b, "d")
  if c + d < t then return "running" end
  return d == 0 and "succeeded" or "failed"
end

-- Write phase: a child of batch ``id`` moved; ``delta`` maps counters (t a c
-- d x) to their change. ``finished``: the child's id when it completed or
-- died now (as_completed lists it, once). Then whatever became due fires.
function Batch.moved(id, delta, finished, now)
  local b = Batch.seen[id]
  if not b then return end  -- no such batch (gone with its retention): nothing to count
  local fields = {}
  for name, change in pairs(delta) do
    local value = Batch.num(b, name) + change
    b.f[name] = tostring(value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if finished then
    local seq = Batch.num(b, "n") + 1
    if redis.call("ZADD", Batch.done_key(id), "NX", seq, finished) == 1 then
      b.f.n = tostring(seq)
      fields[#fields + 1] = "n"
      fields[#fields + 1] = seq
      Batch.wake(b, now)
    end
  end
  if #fields > 0 then redis.call("HSET", Batch.key(id), unpack(fields)) end
  Batch.settle(b, now)
end

-- Tell an as_completed() waiting on the batch (a wait() entry under its id,
-- includes/retention.lua "Waiters") that a child finished; once per call.
function Batch.wake(b, now)
  if b.woken then return end
  b.woken = true  -- looked once: no wait registers during this call
  if not redis.call("ZSCORE", K_WAITERS, b.id) then return end
  redis.call("SPUBLISH", PREFIX .. "done", b.id)
  redis.call("ZADD", K_WAITERS, "XX", "LT", fmt(now + 10000), b.id)  -- WAIT_GRACE_MS
end

-- Add what is due now (closed, not cancelled), each callback once.
function Batch.settle(b, now)
  if b.f.k or not b.f.cl then return end
  local t, c, d = Batch.num(b, "t"), Batch.num(b, "c"), Batch.num(b, "d")
  if d > 0 then Batch.fire(b, "d", now) end
  if c + d < t then
    if b.f.e then  -- a revived child: running again
      b.f.e = nil
      redis.call("HDEL", Batch.key(b.id), "e")
      for _, key in ipairs({Batch.key(b.id), Batch.jobs_key(b.id), Batch.done_key(b.id)}) do
        redis.call("PERSIST", key)
      end
    end
    return
  end
  Batch.fire(b, "c", now)
  if d == 0 then Batch.fire(b, "s", now) end
  local outcome = d == 0 and "s" or "f"
  if b.f.e == outcome then return end
  b.f.e = outcome
  redis.call("HSET", Batch.key(b.id), "e", outcome)
  if outcome == "s" then emit("batch_succeeded", b.id, nil) else emit("batch_failed", b.id, nil) end
  Batch.release(b, outcome == "s" and b.id or "!" .. b.id, now)
  Batch.expire(b)
end

-- Jobs that depend_on the batch are released (succeeded) or sent to dead
-- (failed, cancelled) by maintenance, in bounded steps (includes/dependencies.lua).
function Batch.release(b, entry, now)
  if not b.f.dn then return end
  if redis.call("ZADD", K_RELEASING, "NX", fmt(now), entry) == 1 then ring_doorbell() end
end

-- A finished or cancelled batch is kept for the retention of dead jobs
-- (at least a day), then goes (nothing grows without bound).
function Batch.expire(b)
  local ttl = math.max(OPT.keep_dead_ms, OPT.keep_completed_ms, 86400000)
  for _, key in ipairs({Batch.key(b.id), Batch.jobs_key(b.id), Batch.done_key(b.id)}) do
    redis.call("PEXPIRE", key, ttl)
  end
end

-- Add callback ``w`` ("s", "c", "d") as a job, unless it fired already.
function Batch.fire(b, w, now)
  local spec = b.cb[w]
  if not spec or b.f["f" .. w] then return end
  local id, lane = spec[1], spec[5]
  local fire = fmt(now + math.max(0, spec[6]))
  local attempts = spec[7] < 0 and (OPT.max_attempts or -spec[7]) or spec[7]
  local fields = {"n", spec[2], "p", spec[4], "m", attempts, "c", fmt(now), "b", "^" .. b.id}
  Text.put_payload(fields, #fields, spec[3])
  if lane ~= "" then
    fields[#fields + 1] = "g"
    fields[#fields + 1] = lane
  end
  if spec[8] and spec[8] ~= "" then
    fields[#fields + 1] = "h"
    fields[#fields + 1] = spec[8]
  end
  local n = #fields
  fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "s", "delayed", "at", fire
  ring_if_earliest(fire)
  emit("added", id, lane, "nx", fire)
  redis.call("HSET", job_key(id), unpack(fields))
  redis.call("ZADD", K_DELAYED, fire, id)
  count_delayed(lane, 1)
  META.add("added", 1)
  META.mark("fb")  -- (the feature word, includes/fixed.lua: fields b and g)
  if lane ~= "" then META.mark("fj") end
  b.f["f" .. w] = id
  redis.call("HSET", Batch.key(b.id), "f" .. w, id)
end

-- Write phase: the child ``id`` of the cancelled batch ``bid``, not started
-- (taken out of its lane or set by the caller), ends cancelled: it never runs.
-- Its idempotency key is the caller's (Dedupe.finish: this include comes
-- before includes/dedupe.lua).
function Batch.cancel_child(id, bid, lane, now)
  redis.call("HSET", job_key(id), "s", "cancelled", "f", fmt(now))
  redis.call("ZADD", K_CANCELLED, fmt(now), id)
  emit("cancelled", id, lane)
  Batch.moved(bid, {x = 1}, nil, now)
end

-- Dependencies: a job added with depends_on is "blocked" (K_BLOCKED) with
-- field dp = how many of its dependencies have not completed yet and dd = the
-- dependency ids (JSON). Each pending dependency lists it in its dependents
-- set (dependents_key) and carries field dn (it has dependents).
--
-- A completion releases the dependents: each one's dp goes down by one, and
-- at 0 it enters its lane as a new arrival. A dependency that dies or is
-- removed (orphan_dependents, includes/retention.lua) sends them to dead,
-- naming it (field dx: the dependency that killed it; retryDead.lua revives
-- such a job blocked on what has not completed, and keeps it dead while a
-- dependency is dead or gone) (a dependent added with on_dependency_failure="run", field df,
-- counts it as done instead and runs, seeing the failure in its dependency
-- results); a dependent that dies so passes it on to its own dependents.
--
-- A completion moves each released dependent to the job's readers set
-- (readers_key): retention keeps the completed job until they have finished
-- (includes/readers.lua).
--
-- Work is bounded: at most RELEASE_BUDGET dependents per maintenance call,
-- and per completing call RELEASE_BUDGET plus one per job it completes (work
-- the caller sized: a fan-in completed in one batch is released at once). A
-- job with more dependents waits in K_RELEASING (its id for a completion,
-- "!" .. id for a death or removal; the doorbell rings) and maintenance goes
-- on, a budget per call.
local RELEASE_BUDGET = 500

-- Plan the work for ``entries`` (K_RELEASING members, or completed job ids),
-- at most ``budget`` dependents in all; reads only (read before write).
-- ``lanes`` is the call's set of lanes read so far.
local function read_releases(entries, budget, lanes)
  local plan, left = {}, budget
  local dying = {}  -- the blocked jobs apply_releases sends to dead (each once): counted
  for _, member in ipairs(entries) do
    local parent, why = member, nil
    local batch = nil   -- a batch they depend on (includes/batch.lua)
    if string.sub(member, 1, 1) == "!" then
      parent = string.sub(member, 2)
      local s
      if Batch.is_id(parent) then
        batch = Batch.read(parent)
        s = batch and Batch.state(batch)
        s = (s == "failed" or s == "cancelled") and "dead" or s
      else
        s = read_key("HGET", job_key(parent), "s")
      end
      if s == "dead" then
        why = batch and ("ended " .. Batch.state(batch)) or "died"
      elseif s == "cancelled" then
        why = "was cancelled"
      elseif not s then
        why = "was removed"
      elseif s ~= "completed" then
        why = "alive"   -- retried since (retry_dead): its dependents wait on
      end
    end
    local dk = dependents_key(parent)
    local size = read_key("SCARD", dk)
    batch = batch or Batch.is_id(parent)  -- a batch has no result to read: no readers
    if not why and not batch then read_key("EXISTS", readers_key(parent)) end
    local members, fields = {}, {}
    if why ~= "alive" and size > 0 and left > 0 then
      members = read_key("SRANDMEMBER", dk, math.min(left, size))
      for i, id in ipairs(members) do
        local f
        if why and OPT.metrics then  -- its name too (f[9]), for the metrics
          f = read_key("HMGET", job_key(id), "s", "dp", "p", "g", "k", "dn", "df", "b", "n")
        else
          f = read_key("HMGET", job_key(id), "s", "dp", "p", "g", "k", "dn", "df", "b")
        end
        if why and f[5] then read_key("EXISTS", idem_key(f[5])) end
        if why and f[1] == "blocked" and f[7] ~= "run" and not dying[id] then
          -- apply_releases kills it (kill_dependent): dead in the minute's metrics
          -- (a queue with them on; it never ran: no run, so no time needed)
          dying[id] = true
          Metrics.ended(f[9], 3, nil, nil, nil, 0)
        end
        if why then Batch.read(f[8]) end
        read_lane(lanes, f[4])
        fields[i] = f
      end
      left = left - #members
    end
    local rest = why == "alive" and 0 or size - #members
    plan[#plan + 1] = {member = member, parent = parent, why = why, members = members,
      fields = fields, rest = rest, batch = batch}
  end
  return plan
end

-- A blocked job whose dependency died or was removed: dead, naming it.
local function kill_dependent(id, f, parent, why, now)
  local jk = job_key(id)
  -- dx: it never ran (retryDead keeps it dead while that dependency is gone)
  redis.call("HSET", jk, "s", "dead", "f", fmt(now), "dx", parent,
    "e", "dependency " .. parent .. " " .. why .. " before it completed")
  redis.call("HDEL", jk, "dp")
  redis.call("ZREM", K_BLOCKED, id)
  count_delayed(f[4], -1)
  redis.call("ZADD", K_DEAD, fmt(now), id)
  emit("dead", id, f[4], "e", "dependency " .. parent .. " " .. why)
  Dedupe.finish(f[5], id, now, OPT.keep_dead_ms)
  orphan_dependents(id, f[6], now)
  if f[8] then Batch.moved(f[8], {d = 1}, id, now) end
  wake_waiters(id, now)
end

-- Carry out a plan of read_releases at server time ``now``; returns how many
-- blocked jobs it released into their lanes or sent to dead.
local function apply_releases(plan, now)
  local done = 0
  local order = nil
  local killed = {}  -- fields were read before the first write: a job two entries name dies once
  for _, entry in ipairs(plan) do
    if #entry.members > 0 then
      call_chunked("SREM", dependents_key(entry.parent), entry.members, 1)
    end
    local readers = {}
    for i, id in ipairs(entry.members) do
      local f = entry.fields[i]
      if f[1] == "blocked" and not killed[id] then
        done = done + 1
        if not entry.why and not entry.batch then readers[#readers + 1] = id end
        if entry.why and f[7] ~= "run" then
          kill_dependent(id, f, entry.parent, entry.why, now)
          killed[id] = true
        elseif redis.call("HINCRBY", job_key(id), "dp", -1) <= 0 then
          order = order or ordering()
          local score = fmt(arrival_score(order, tonumber(f[3]) or 0, now))
          redis.call("HSET", job_key(id), "s", "waiting", "sc", score)
          redis.call("HDEL", job_key(id), "dp")
          redis.call("ZREM", K_BLOCKED, id)
          count_delayed(f[4], -1)  -- counted as waiting now
          enter_lane(f[4], id, score)
          emit("unblocked", id, f[4])
        end
      end
    end
    -- they may read its result until they finish: retention keeps it (includes/readers.lua)
    if #readers > 0 then call_chunked("SADD", readers_key(entry.parent), readers, 1) end
    if entry.rest > 0 then
      -- an idle worker wakes, runs maintenance and goes on
      if redis.call("ZADD", K_RELEASING, "NX", fmt(now), entry.member) == 1 then ring_doorbell() end
    else
      redis.call("ZREM", K_RELEASING, entry.member)
    end
  end
  return done
end

-- retryDead: move one page of dead jobs back with fresh attempts: to waiting,
-- or to blocked while a dependency of theirs has not completed.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     page: most dead jobs to look at when no ids are given (the
--             client caps it: engine.RETRY_PAGE; a call's work is bounded)
-- ARGV[8]     offset: rank in the dead set (oldest first) to start from when
--             no ids are given (the jobs kept dead by earlier pages)
-- ARGV[9..]   ids to move (optional; ids that are not dead are skipped)
--
-- A job added with depends_on (field dd) comes back on what it still waits
-- for (includes/dependencies.lua). Each dependency is:
--   completed: done (it becomes one of its readers again);
--   dead and revived by this same call, or alive (waiting, active, blocked,
--   …): pending, the job goes back to blocked on it;
--   dead and not revived by this call: done for a job added with
--   on_dependency_failure="run" (field df); else the job stays dead (kept);
--   gone (pruned or removed): done for a job that was released before (it
--   reads it as gone) or that runs anyway; a job killed by its dependency
--   (field dx, it never ran) stays dead (kept): its dependency can never
--   complete.
-- A job kept dead keeps the jobs that depend on it in this call dead too.
--
-- Returns: {moved ids, kept ids (dead for their dependencies), ids looked at}.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include batch
-- @include dedupe
-- @include readers

local ids = {}
for i = 9, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then
  local first = tonumber(ARGV[8])
  ids = redis.call("ZRANGE", K_DEAD, first, first + tonumber(ARGV[7]) - 1)
end
local looked = #ids
local order = ordering()
-- read phase: which ids are dead, their hashes, idempotency keys and lanes
local candidates, fields, reviving, lanes = {}, {}, {}, {}
for _, id in ipairs(ids) do
  if reviving[id] == nil and redis.call("ZSCORE", K_DEAD, id) then
    local f = read_key("HMGET", job_key(id), "p", "g", "k", "dd", "df", "dx", "b")
    if not f[1] then missing_job(id) end
    Batch.read(f[7])
    -- its key is held again only if its record still names it (includes/dedupe.lua)
    if f[3] then f.owned = (Dedupe.parse(read_key("GET", idem_key(f[3]))) or {}).id == id end
    read_lane(lanes, f[2])
    if f[4] then f.deps = cjson.decode(f[4]) end
    candidates[#candidates + 1] = id
    fields[id] = f
    reviving[id] = true
  end
end
-- read phase: the state of each dependency ("" = gone), and the set its
-- revived dependent will join
local dep_state = {}
for _, id in ipairs(candidates) do
  for _, dep in ipairs(fields[id].deps or {}) do
    if dep_state[dep] == nil then
      local s = read_key("HGET", job_key(dep), "s") or ""
      dep_state[dep] = s
      if s == "completed" then
        read_key("EXISTS", readers_key(dep))
      elseif s ~= "" then
        read_key("EXISTS", dependents_key(dep))
      end
    end
  end
end

-- A dependency that keeps its dependent dead (see the header).
local function keeps_dead(f, dep)
  if f[5] == "run" then return false end
  local s = dep_state[dep]
  return (s == "dead" and not reviving[dep]) or (s == "" and f[6] ~= false)
end
-- kept ones keep their own dependents of this call dead: until nothing changes
local changed = true
while changed do
  changed = false
  for _, id in ipairs(candidates) do
    local f = fields[id]
    if reviving[id] and f.deps then
      for _, dep in ipairs(f.deps) do
        if keeps_dead(f, dep) then
          reviving[id], changed = false, true
          break
        end
      end
    end
  end
end
local moved, kept, arrivals = {}, {}, 0
for _, id in ipairs(candidates) do
  local f = fields[id]
  if reviving[id] then
    moved[#moved + 1] = id
    f.pending, f.done = {}, {}
    for _, dep in ipairs(f.deps or {}) do
      local s = dep_state[dep]
      if s == "completed" then
        f.done[#f.done + 1] = dep
      elseif s ~= "" and (s ~= "dead" or reviving[dep]) then
        f.pending[#f.pending + 1] = dep
      end  -- else done without a result (dead or gone: run anyway, or released before)
    end
    if #f.pending == 0 then arrivals = arrivals + 1 end
  else
    kept[#kept + 1] = id
  end
end

-- write phase
if #moved == 0 then return {moved, kept, looked} end
call_chunked("ZREM", K_DEAD, moved, 1)
if order == "composite" and arrivals > 1 then reserve_arrivals(arrivals) end
local now = fmt(now_ms())
for _, id in ipairs(moved) do
  local jk, f = job_key(id), fields[id]
  -- a revived child of a batch is not dead any more (its callbacks that fired stay fired)
  if f[7] then Batch.moved(f[7], {d = -1}, nil, tonumber(now)) end
  if f.owned then redis.call("PERSIST", idem_key(f[3])) end
  -- it reads its completed dependencies' results again: retention keeps them
  for _, dep in ipairs(f.done) do
    redis.call("SADD", readers_key(dep), id)
    redis.call("HSET", job_key(dep), "dn", "1")
    META.mark("fd")  -- (the feature word, includes/fixed.lua)
  end
  if #f.pending > 0 then
    redis.call("HSET", jk, "s", "blocked", "dp", #f.pending, "a", 0, "st", 0)
    redis.call("HDEL", jk, "f", "at", "dx")
    redis.call("ZADD", K_BLOCKED, now, id)
    count_delayed(f[2], 1)  -- max_waiting counts it, as an add's blocked job
    for _, dep in ipairs(f.pending) do
      redis.call("SADD", dependents_key(dep), id)
      redis.call("HSET", job_key(dep), "dn", "1")
      META.mark("fd")
    end
    emit("requeued", id, f[2])
  else
    local score = fmt(arrival_score(order, tonumber(f[1]), tonumber(now)))
    redis.call("HSET", jk, "s", "waiting", "sc", score, "a", 0, "st", 0)
    redis.call("HDEL", jk, "f", "at", "dx")
    enter_lane(f[2], id, score)
    emit("requeued", id, f[2])
  end
end
flush_waiting()
flush_events()
return {moved, kept, looked}

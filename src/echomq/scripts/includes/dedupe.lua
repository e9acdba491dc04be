-- Deduplication and debounce (echomq/dedupe.py, DESIGN §10, docs/lifecycle.md).
--
-- A key's record is the string idem_key(key), read and written only by the
-- scripts of the jobs that carry the key (a queue that never dedupes has no
-- record and runs no command for one: DESIGN §9):
--   "<id>"                                         add(key=K), i.e. Dedupe(K)
--   "<id> <mode> <window ms> <max_wait ms> <first ms> [<extra>]"   any other Dedupe
-- <id> is the job that stands for the key, <first> the server time of the
-- add that made it; <extra> is, for drop, the server time the job finished
-- (Dedupe.finish) and, for latest, the job the new one is held behind.
--
-- The lock is the job's own state, never a TTL that can lapse while it lives:
-- a record has no expiry while its job has not finished (throttle's is its
-- window, which is what throttle means). When the job finishes the record
-- gets an expiry: drop with a window keeps the key for the window after the
-- finish time (server clock), every other mode for the retention age of the
-- finished job (retention may prune the job earlier; an add that finds the
-- job gone treats the key as free, as add(key=) always did). Deleting a job
-- (remove, cancel, purge) releases the key it holds (Dedupe.release).
--
-- latest holds one job behind a running one with the dependency machinery
-- (includes/dependencies.lua): the new job is blocked on the running one,
-- with on_dependency_failure "run", so it starts once that one completed,
-- died or was removed, and never while it is active or waiting for a retry.
local Dedupe = {}

Dedupe.ALIVE = {waiting = true, delayed = true, blocked = true, active = true, failed = true}
-- not started yet: an add may still change what it will run with
Dedupe.PENDING = {waiting = true, delayed = true, blocked = true}

-- A record's fields (nil for none): mode "key" for a plain add(key=).
function Dedupe.parse(raw)
  if not raw then return nil end
  local id, mode, window, most, first, extra =
    string.match(raw, "^(%S+) (%a+) (%d+) (%d+) (%d+) ?(%S*)$")
  if not id then return {id = raw, mode = "key", window = 0, max_wait = 0} end
  return {id = id, mode = mode, window = tonumber(window), max_wait = tonumber(most),
    first = tonumber(first), extra = extra ~= "" and extra or nil}
end

-- add.lua's job element 15: "" (a plain key=) or "<mode> <window ms> <max_wait ms>".
function Dedupe.spec(text)
  if text == nil or text == "" then return {mode = "key", window = 0, max_wait = 0} end
  local mode, window, most = string.match(text, "^(%a+) (%d+) (%d+)$")
  return {mode = mode, window = tonumber(window), max_wait = tonumber(most)}
end

-- The record of job ``id`` made by an add at ``first`` (``extra`` as above).
function Dedupe.record(id, spec, first, extra)
  if spec.mode == "key" then return id end
  local raw = id .. " " .. spec.mode .. " " .. fmt(spec.window) .. " " .. fmt(spec.max_wait)
    .. " " .. fmt(first)
  if extra then raw = raw .. " " .. extra end
  return raw
end

-- Read phase of one add with key ``key`` and Dedupe ``spec`` at ``now``. ``known``
-- is what this batch decided for the key already (nil: nothing; see add.lua).
-- Returns the decision: {} to make a new job ({behind = id}: latest's new job
-- held behind the running ``id``), or {outcome, kept, rec, lane, state,
-- first} for an add that makes no job: "dropped", "throttled" (its id is
-- returned) or "replaced" (its data replaced; debounce moves its run time
-- too). ``rec`` (the record, with the job's state and lane read) is what
-- the batch then knows of the key.
function Dedupe.decide(key, spec, now, known)
  local rec = known
  if not rec then rec = Dedupe.parse(read_key("GET", idem_key(key))) end
  if not rec then return {} end
  if rec.state == nil then  -- (a job this batch made is known: rec.index)
    local f = read_key("HMGET", job_key(rec.id), "s", "g")
    rec.state, rec.lane = f[1] or false, f[2]
  end
  local state, mode = rec.state, spec.mode
  local hit = {kept = rec.id, rec = rec, lane = rec.lane}
  if mode == "throttle" then
    if rec.first and now < rec.first + spec.window then hit.outcome = "throttled" end
  elseif mode == "key" then  -- add(key=K): held while the job exists (retention after it finished)
    if state then hit.outcome = "dropped" end
  elseif mode == "drop" then
    if Dedupe.ALIVE[state]
      or (rec.mode == "drop" and rec.extra and now < tonumber(rec.extra) + spec.window) then
      hit.outcome = "dropped"
    end
  elseif Dedupe.PENDING[state] then
    hit.outcome, hit.state, hit.first = "replaced", state, rec.first or now
  elseif mode == "latest" and Dedupe.ALIVE[state] then
    return {behind = rec.id}   -- running or waiting for a retry: one more waits behind it
  end
  if not hit.outcome then return {} end
  return hit
end

-- Write phase of a "replaced" decision: the job ``kept`` gets ``data``; a
-- delayed debounce job also the run time now + window, never past its first
-- add + max_wait. Returns the new run time (nil: unchanged).
function Dedupe.replace(decision, spec, data, now)
  local jk = job_key(decision.kept)
  if spec.mode == "debounce" and decision.state == "delayed" then
    local fire = now + spec.window
    if spec.max_wait > 0 then fire = math.min(fire, decision.first + spec.max_wait) end
    local at = fmt(fire)
    Text.replace_payload(jk, data, "at", at)
    redis.call("ZADD", K_DELAYED, "XX", at, decision.kept)
    META.note("td", fire)
    return at
  end
  Text.replace_payload(jk, data)
  return nil
end

-- A new job's run time under ``spec`` (debounce: now + window; nil: as added).
function Dedupe.fire(spec, now)
  if spec.mode == "debounce" then return now + spec.window end
  return nil
end

-- Write phase of a new job ``id`` holding ``key`` (``behind``: latest's running job).
function Dedupe.hold(key, id, spec, now, behind)
  local raw = Dedupe.record(id, spec, now, behind)
  if spec.mode == "throttle" then
    redis.call("SET", idem_key(key), raw, "PX", fmt(spec.window))
  else
    redis.call("SET", idem_key(key), raw)
  end
end

-- Job ``id`` holding ``key`` finished (completed or dead) at ``now``;
-- ``keep_ms`` is its retention age. ``raw``: the record as the caller's read
-- phase read it (GET; false: none), else (nil) it is read now (the caller's
-- read phase read the key). Changes it only if it still names the job.
function Dedupe.finish(key, id, now, keep_ms, raw)
  if not key or key == "" then return end
  local k = idem_key(key)
  if raw == nil then raw = redis.call("GET", k) end
  local rec = Dedupe.parse(raw)
  if not rec or rec.id ~= id or rec.mode == "throttle" then return end
  if rec.mode == "drop" then
    local raw = Dedupe.record(id, rec, rec.first, fmt(now))
    redis.call("SET", k, raw, "PX", fmt(rec.window))
  else
    redis.call("PEXPIRE", k, math.max(1, keep_ms))
  end
end

-- Read phase of deleting job ``id`` whose field k is ``key``: what
-- Dedupe.release needs (nil: the record names another job or none).
function Dedupe.read_release(key, id)
  local rec = Dedupe.parse(read_key("GET", idem_key(key)))
  if not rec or rec.id ~= id then return nil end
  rec.key = key
  if rec.mode == "latest" and rec.extra then
    -- it was held behind a job: that one holds the key on while it runs
    local s = read_key("HGET", job_key(rec.extra), "s")
    if not (s and Dedupe.ALIVE[s]) then rec.extra = nil end
  end
  return rec
end

-- Write phase: the job of ``rec`` (Dedupe.read_release) is deleted.
function Dedupe.release(rec)
  if not rec then return end
  if rec.extra and rec.mode == "latest" then
    redis.call("SET", idem_key(rec.key), Dedupe.record(rec.extra, rec, rec.first))
  else
    redis.call("DEL", idem_key(rec.key))
  end
end

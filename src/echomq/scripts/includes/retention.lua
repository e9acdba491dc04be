-- Finished jobs: dead letters, and pruning finished sets by age and count.
--
-- An idempotency key (a Dedupe record, includes/dedupe.lua) outlives its
-- job's completion by the retention age or its window: Dedupe.finish gives it
-- that TTL when the job completes or dies (add also checks that the job it
-- names still exists), so pruning never has to look it up.
--
-- Pruning is planned (read_prune: every key it will delete is read) before
-- the script's first write, and done (apply_prune) after the script's own
-- additions to the set.
local PRUNE_BUDGET = 100  -- most jobs one call removes from one set, so no call runs long

-- Waiters (wait(), echomq/sending/waiters.py). A client waiting for a job
-- subscribes to the queue's done channel, then registers the job in
-- K_WAITERS (wait.lua: id -> its wait's deadline, ms). Every script that
-- makes a job final (completed, dead) or deletes it calls wake_waiters: if
-- the job is waited on, the id is published on the done channel (sharded
-- pub/sub, SPUBLISH: the channel carries the queue's hash tag, so the
-- message stays on the queue's shard) and the waiting clients read the job
-- again. A final transition shortens the entry to at most WAIT_GRACE_MS,
-- and pruning by retention skips a job whose entry has not expired: a
-- waiter can read a job it waited on for WAIT_GRACE_MS after it finished,
-- whatever the retention. Expired entries are removed at most
-- WAITER_PRUNE_BUDGET per call (wait.lua, maintain.lua).
local WAIT_GRACE_MS = 10000
local WAITER_PRUNE_BUDGET = 100
local waiters_present     -- whether K_WAITERS exists (read once per call; nil: not yet)
on_call(function() waiters_present = nil end)

local function any_waiters()
  if waiters_present == nil then
    waiters_present = META.uses("fw") and redis.call("EXISTS", K_WAITERS) == 1
  end
  return waiters_present
end

-- Whether a wait() on ``id`` is registered and not expired. Reads only.
local function waited(id, now)
  if not any_waiters() then return false end
  local deadline = redis.call("ZSCORE", K_WAITERS, id)
  return deadline and tonumber(deadline) >= now
end

-- Tell the clients waiting on ``id`` that it is final (``now`` given: the
-- entry keeps protecting it from pruning for WAIT_GRACE_MS at most) or gone
-- (``now`` nil: the entry is removed; the waiters then hear JobNotFound).
local function wake_waiters(id, now)
  if not any_waiters() or not redis.call("ZSCORE", K_WAITERS, id) then return end
  redis.call("SPUBLISH", PREFIX .. "done", id)
  if now then
    redis.call("ZADD", K_WAITERS, "XX", "LT", string.format("%.0f", now + WAIT_GRACE_MS), id)
  else
    redis.call("ZREM", K_WAITERS, id)
  end
end

-- Remove expired waiter entries, at most WAITER_PRUNE_BUDGET, oldest first.
local function prune_waiters(now)
  local gone = redis.call("ZRANGEBYSCORE", K_WAITERS, "-inf", "(" .. string.format("%.0f", now),
    "LIMIT", 0, WAITER_PRUNE_BUDGET)
  if #gone > 0 then redis.call("ZREM", K_WAITERS, unpack(gone)) end
  return #gone
end

-- The jobs of a finished set past its age or count, oldest first, at most
-- PRUNE_BUDGET. ``adding`` lists the ids this call is about to add to the set
-- (scored now, so newer than every job there): they count towards the count
-- limit and are pruned last. ``keeper`` (READERS of includes/readers.lua, for
-- the completed set) keeps the jobs a dependent may still read. ``floor``: a
-- time (ms) no job of the set finished before, if the caller knows one (then
-- a set whose jobs are all too young is not read for age). Reads only.
local function read_prune(zkey, keep_ms, keep_count, now, adding, keeper, floor)
  adding = adding or {}
  local victims
  if floor and floor >= now - keep_ms then
    victims = {}
  else
    victims = redis.call("ZRANGEBYSCORE", zkey, "-inf", "(" .. fmt(now - keep_ms),
      "LIMIT", 0, PRUNE_BUDGET)
  end
  local existing = redis.call("ZCARD", zkey)
  local excess = existing + #adding - #victims - keep_count
  local room = PRUNE_BUDGET - #victims
  local take = math.min(excess, room)
  if take > 0 then
    local first = #victims
    local older = math.min(take, existing - first)
    if older > 0 and first == 0 then
      victims = redis.call("ZRANGE", zkey, 0, older - 1)  -- (no copy)
    elseif older > 0 then
      for _, id in ipairs(redis.call("ZRANGE", zkey, first, first + older - 1)) do
        victims[#victims + 1] = id
      end
    end
    local newer = take - math.max(older, 0)
    if newer > 0 then
      -- equal scores sort by member in the set, so the lowest ids go first
      -- (copied by a loop: unpack of a large batch overflows Lua's stack)
      local sorted = {}
      for i = 1, #adding do sorted[i] = adding[i] end
      table.sort(sorted)
      for i = 1, math.min(newer, #sorted) do victims[#victims + 1] = sorted[i] end
    end
  end
  if any_waiters() then  -- a job a live wait() is registered on is kept (see Waiters)
    local kept = {}
    for _, id in ipairs(victims) do
      if not waited(id, now) then kept[#kept + 1] = id end
    end
    victims = kept
  end
  if not keeper then
    -- (with s, which every job has: a job without tags is found, not probed.
    -- Read before write: on a cluster every pruned job's hash is read, for a
    -- migration may have moved it (includes/keys.lua); elsewhere, on a queue
    -- none of whose jobs has tags or a log (letters t and o), none is)
    victims.existing = existing
    if #victims == 0 or not (META.uses("ft") or META.uses("fo") or META.in_cluster()) then
      return victims  -- (no tables for tags and logs: none to take away)
    end
    local tags, logs = {}, {}
    for i = 1, #victims do
      local id = victims[i]
      local f = read_key("HMGET", job_key(id), "tg", "s", "lg")
      tags[id], logs[id] = f[1] or nil, f[3] and true or nil
      if f[1] then Tags.read(f[1]) end  -- the indexes it leaves
      if f[3] then Logs.read_gone(id, f[3]) end  -- its log
    end
    victims.tags, victims.logs = tags, logs
    return victims
  end
  -- completed jobs a dependent may still read are kept (includes/readers.lua)
  local hold = {left = keeper.budget, forget = {}, drop = {}, tags = {}, logs = {}}
  local kept, held = {}, {}
  for _, id in ipairs(victims) do
    if keeper.read(id, hold) then held[#held + 1] = id else kept[#kept + 1] = id end
  end
  kept.held, kept.forget, kept.drop, kept.now = held, hold.forget, hold.drop, now
  for _, id in ipairs(kept) do
    Tags.read(hold.tags[id])
    Logs.read_gone(id, hold.logs[id])
  end
  kept.tags, kept.logs = hold.tags, hold.logs
  kept.existing = existing
  return kept
end

-- The completed set's pruning, read only when something can be due. The meta
-- hash's field "pc" is "<oldest> <size> <total>" from the last completion
-- that looked and found nothing to prune: no job in the set finished before
-- <oldest> (ms), and the set held <size> jobs when the meta hash's running
-- total "completed" was <total>. Both stay bounds whoever writes the set
-- after (any client, of any version): a job joins the set only by
-- completing, at the time it completes (so no later than any job there),
-- and every completion adds one to "completed"; everything else only removes
-- jobs or moves them to the newest end. So while <oldest> is not past the
-- retention age and <size> + (completed now - <total>) + the jobs this call
-- adds is within the retention count, no job can be due and the set is not
-- read (a "pc" that is missing, unreadable or ahead of "completed" reads the
-- set). The caller read "pc" and "completed" with META.read (includes/fixed.lua).
-- ``keeper``: as read_prune's.
-- "pc" as numbers, kept for the text they were parsed from (a pure function
-- of it, so kept from call to call: "pc" changes only when a completion
-- looks at the set, and parsing a number costs ~1,200 instructions)
-- (and PC_PARSED.none: no victims, read only: apply_prune writes nothing into it)
local PC_PARSED = {text = false, none = {}}

local function read_prune_completed(now, adding, keeper)
  local keep_ms, keep_count = OPT.keep_completed_ms, OPT.keep_completed
  local total = tonumber(META.known.completed) or 0
  local pc, parsed = META.known.pc or "", PC_PARSED
  if parsed.text ~= pc then
    local oldest, size, at = string.match(pc, "^(%d+) (%d+) (%d+)$")
    parsed.text, parsed.oldest, parsed.size, parsed.at = pc, tonumber(oldest), tonumber(size),
      tonumber(at)
  end
  local oldest, size, at = parsed.oldest, parsed.size, parsed.at
  if oldest and total >= at and oldest >= now - keep_ms
    and size + (total - at) + #adding <= keep_count then
    return parsed.none
  end
  -- (<oldest> stays a bound of the set however old "pc" is: the set is not
  -- read for age while it is young enough)
  local victims = read_prune(K_COMPLETED, keep_ms, keep_count, now, adding, keeper, oldest)
  if #victims == 0 then
    -- nothing due now: note until when (the set's oldest job: kept ones count)
    local first = redis.call("ZRANGE", K_COMPLETED, 0, 0, "WITHSCORES")
    oldest = math.min(tonumber(first[2]) or now, now)
    META.put("pc", fmt(oldest) .. " " .. fmt(victims.existing + #adding) .. " " .. fmt(total + #adding))
  end
  return victims
end

-- Delete the jobs read_prune chose; returns how many. The completed jobs its
-- keeper held for their readers go to the newest end of the set (includes/readers.lua).
local function apply_prune(zkey, victims)
  local forget = victims.forget
  for i = 1, forget and #forget or 0 do
    call_chunked("SREM", forget[i][1], forget[i][2], 1)
  end
  if victims.held and #victims.held > 0 then
    local pairs_ = {}
    for _, id in ipairs(victims.held) do
      pairs_[#pairs_ + 1] = fmt(victims.now)
      pairs_[#pairs_ + 1] = id
    end
    redis.call("ZADD", zkey, "XX", unpack(pairs_))
  end
  local drop = victims.drop
  for i = 1, drop and #drop or 0 do redis.call("DEL", drop[i]) end
  if #victims == 0 then return 0 end
  local tags = victims.tags
  for i = 1, tags and next(tags) ~= nil and #victims or 0 do
    local tg = tags[victims[i]]
    if tg then Tags.unindex(victims[i], tg) end
  end
  if #victims == 1 and not (victims.logs and victims.logs[victims[1]]) then
    redis.call("DEL", job_key(victims[1]))  -- (the common case: one job, no table)
    redis.call("ZREM", zkey, victims[1])
    return 1
  end
  for i = 1, #victims, 500 do
    local hashes = {}
    for j = i, math.min(i + 499, #victims) do
      local id = victims[j]
      hashes[#hashes + 1] = job_key(id)
      if victims.logs and victims.logs[id] then hashes[#hashes + 1] = Logs.key(id) end
    end
    redis.call("DEL", unpack(hashes))
  end
  call_chunked("ZREM", zkey, victims, 1)
  return #victims
end

-- Read what deleting a job touches besides its hash (for drop_job): its
-- idempotency key and whether it still names the job, its tags
-- (includes/tags.lua), its log (includes/logs.lua); and the job's lane (nil:
-- the default lane).
local function read_idem(id)
  local f = read_key("HMGET", job_key(id), "s", "k", "g", "tg", "lg")
  if not f[1] then missing_job(id) end
  local key = f[2]
  local idem = {tags = f[4] or nil, log = f[5] and true or nil}
  Tags.read(idem.tags)  -- the indexes it leaves
  Logs.read_gone(id, f[5])  -- its log
  if key then idem.record = Dedupe.read_release(key, id) end
  return idem, f[3]
end

-- Delete one job's hash and its idempotency key if it still names the job;
-- ``idem`` is what read_idem read before the script's first write.
local function drop_job(id, idem)
  if idem then Dedupe.release(idem.record) end
  if idem and idem.tags then Tags.unindex(id, idem.tags) end
  if idem and idem.log then
    redis.call("DEL", job_key(id), Logs.key(id))
  else
    redis.call("DEL", job_key(id))
  end
  wake_waiters(id, nil)
end

-- A job with dependents (field dn) that dies or is removed: maintenance sends
-- its blocked dependents to dead, a budget per call (includes/dependencies.lua:
-- a "!" entry in K_RELEASING); the doorbell wakes an idle worker to run it.
local function orphan_dependents(id, has_dependents, now)
  if not has_dependents then return end
  if redis.call("ZADD", K_RELEASING, "NX", fmt(now), "!" .. id) == 1 then
    redis.call("LPUSH", K_WAKE, "1")
    redis.call("LTRIM", K_WAKE, 0, 0)
  end
end

-- Send one job to dead now, with ``err`` (cancel, a job past its expiry).
-- Without ``err`` it only reads what burying it will touch (the job's
-- fields, its idempotency key, the dead set's pruning with the job added)
-- and returns that plan, for a later bury(id, now, err, plan): cancel.lua
-- reads it so before its first write (read before write). Without a plan
-- bury reads it now, after earlier writes: a claim that meets a job past
-- its expiry is the one documented exception (docs/lifecycle.md; the
-- claim's plan (includes/rotation.lua) has read the job's hash, its idempotency key and one
-- budget of the dead set's pruning, so what is left is pruning beyond that).
-- (One function, not two: claim.lua is near Lua's limit of 200 locals per
-- chunk.)
local function bury(id, now, err, burial)
  if not burial then
    local f = read_key("HMGET", job_key(id), "k", "g", "a", "dn", "s", "b")  -- s: found, not probed
    if f[1] then read_key("EXISTS", idem_key(f[1])) end
    Batch.read(f[6])
    burial = {fields = f, victims = read_prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now, {id})}
    if not err then return burial end
  end
  local f = burial.fields
  local jk = job_key(id)
  redis.call("HSET", jk, "s", "dead", "f", fmt(now), "e", err)
  Dedupe.finish(f[1], id, now, OPT.keep_dead_ms)
  redis.call("ZADD", K_DEAD, fmt(now), id)
  apply_prune(K_DEAD, burial.victims)
  orphan_dependents(id, f[4], now)
  emit("dead", id, f[2], "a", f[3] or "0", "e", event_error(err))
  if f[6] then Batch.moved(f[6], {a = f[5] == "active" and -1 or 0, d = 1}, id, now) end
  wake_waiters(id, now)
end

-- add: put a batch of new jobs into their lanes (or the delayed set).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     ordering the client opened the queue with: "composite" | "mint" | "aged"
-- ARGV[8]     the jobs, one JSON array of arrays (one string, so a batch of
--             thousands costs the client one argument, not nine per job):
--             [id, name, data (JSON text), tier, lane ("" = default),
--              delay_ms (-1 = none), run_at_ms (-1 = none), max_attempts
--              (-n = none given: the stored setting, else n, the client's),
--              idempotency key ("" = none), expires_in_ms (-1 = never;
--              stored as the server time it expires at), headers (JSON
--              object text, "" = none), depends_on (JSON array of job
--              ids, "" = none: see includes/dependencies.lua),
--              "run" to run anyway when a dependency fails ("" = go dead),
--              tags (JSON object text, keys sorted, "" = none: includes/tags.lua),
--              dedupe ("" = a plain key, or "<mode> <window ms> <max_wait ms>":
--              includes/dedupe.lua; only with a key),
--              batch id ("" = none: includes/batch.lua)]
--             depends_on may name batches (bat_…) too: the job waits until the
--             batch has succeeded.
--
-- Returns: the list of ids, one per job (the id of the job that stands for
--          the add where its key holds: dropped, throttled, or its data
--          replaced (includes/dedupe.lua); a job whose id exists already is
--          left as it is: a client's retry after a lost reply, e.g. in a
--          failover, must not add or reset it twice), or
--          E_ORDERING (-3) if the queue exists with the other ordering, or
--          {E_NOT_FOUND (-1), id, state} if a dependency is unknown ("") or
--          dead (nothing is written then).
--          {E_INVALID_STATE (-6), "dropping", ms} while drop() deletes the
--          queue (its last page at ms, server clock; nothing is written).
--          {E_LANE_FULL (-5), lane, held, adding, max_waiting} when the batch
--          would make a lane hold more than its max_waiting waiting + delayed
--          + blocked jobs (nothing is written).
--          {E_INVALID_STATE (-6), "batch", batch id, why, children} when a job
--          names a batch that is "unknown", "closed", "cancelled" or would
--          hold more than Batch.MAX_CHILDREN ("full"); a dependency on a batch
--          that failed or was cancelled is {E_NOT_FOUND, batch id, "failed" |
--          "cancelled"} (nothing is written).
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include renumber
-- @include controls
-- @include batch
-- @include tags
-- @include dedupe
-- @include readers

-- adds are refused while a drop's last page is this recent (ms: dropPage.lua)
local DROP_FENCE_MS = 60000

local requested = ARGV[7]
local jobs = cjson.decode(ARGV[8])
-- a step of a renumbering in progress (includes/renumber.lua), read with the
-- stored ordering and the counters this call writes (META, includes/fixed.lua)
-- (and the feature word, includes/fixed.lua, and the next
-- due time "td", includes/time.lua: all in one HMGET)
local renumber_step, meta = read_renumber(#jobs, nil, "w", "added", "ev", "last", "td",
  unpack(META.FEATURES))
local stored = meta[1]
if stored and stored ~= requested then return E_ORDERING end

local now = now_ms()
local created_at = fmt(now)
-- a drop() under way deletes the queue page by page: an add now would leave
-- a job half deleted (dropPage.lua); refused until DROP_FENCE_MS after its last page
if meta[3] and now - tonumber(meta[3]) < DROP_FENCE_MS then
  return {E_INVALID_STATE, "dropping", meta[3]}
end

-- read phase: every idempotency key, job hash and lane the batch touches
-- (the tables a feature needs are made when a job uses it: nil until then;
-- a table made per call is garbage the server's Lua collector pays for)
local ids = {}
local created_ids = #jobs > 1 and {} or nil  -- what earlier jobs of this batch create
-- key -> what this batch knows of its record (includes/dedupe.lua), and
-- job index -> the decision for its key
local held, decided = nil, nil
local lanes = {}
local blocked_on = nil  -- job index -> its pending dependencies
local reads_of = nil    -- job index -> its dependencies completed already (it reads their results)
-- lane -> jobs this batch adds to it (only a queue with lane controls: max_waiting)
local controls = META.uses("fl")
local adding, adding_order = {}, {}
local joining, joining_order = nil, nil  -- batch id -> children this call adds to it
for i, job in ipairs(jobs) do
  local id, key = job[1], job[9]
  local existing = nil
  if key ~= "" then
    if not decided then held, decided = {}, {} end
    local spec = Dedupe.spec(job[15])
    local decision = Dedupe.decide(key, spec, now, held[key])
    decision.spec = spec
    decided[i] = decision
    existing = decision.kept
    if existing then
      held[key] = decision.rec
      local made = decision.rec.index  -- a job of this batch: it takes the latest data now
      if decision.outcome == "replaced" and made then jobs[made][3] = job[3] end
    elseif decision.behind then
      job[12], job[13] = cjson.encode({decision.behind}), "run"
    end
  end
  -- (the meta hash exists when it holds the ordering: one EXISTS confirms a miss)
  if not existing and ((created_ids and created_ids[id]) or key_exists(job_key(id), stored ~= nil)) then
    existing = id
  end
  if existing then
    ids[i] = existing
  else
    ids[i] = false   -- created below
    if job[12] ~= "" then
      -- its dependencies: pending ones (not completed yet) block it
      local pending, done_deps = {}, {}
      for _, dep in ipairs(cjson.decode(job[12])) do
        local state
        if Batch.is_id(dep) then  -- a batch: done once it succeeded
          local b = Batch.read(dep, true)
          state = b and Batch.state(b)
          if state == "failed" or state == "cancelled" then return {E_NOT_FOUND, dep, state} end
          state = state and (state == "succeeded" and "batch" or "waiting")
        else
          state = created_ids and created_ids[dep] and "waiting" or read_key("HGET", job_key(dep), "s")
        end
        if not state or state == "dead" then return {E_NOT_FOUND, dep, state or ""} end
        if state == "batch" then
          -- succeeded already: nothing to wait for, no result to read
        elseif state ~= "completed" then
          pending[#pending + 1] = dep
          read_key("EXISTS", dependents_key(dep))
        else
          done_deps[#done_deps + 1] = dep
          read_key("EXISTS", readers_key(dep))
        end
      end
      if not blocked_on then blocked_on, reads_of = {}, {} end
      blocked_on[i] = pending
      reads_of[i] = done_deps
    end
    if created_ids then created_ids[id] = true end
    local bid = job[16]
    if bid and bid ~= "" then
      local b = Batch.read(bid, true)  -- an add finishes no child
      if not b then return {E_INVALID_STATE, "batch", bid, "unknown", 0} end
      local why = b.f.k and "cancelled" or (b.f.cl and "closed")
      if why then return {E_INVALID_STATE, "batch", bid, why, Batch.num(b, "t")} end
      if not joining then joining, joining_order = {}, {} end
      if not joining[bid] then
        joining_order[#joining_order + 1] = bid
        joining[bid] = 0
        read_key("EXISTS", Batch.jobs_key(bid))
      end
      joining[bid] = joining[bid] + 1
      if Batch.num(b, "t") + joining[bid] > Batch.MAX_CHILDREN then
        return {E_INVALID_STATE, "batch", bid, "full", Batch.num(b, "t")}
      end
    end
    if key ~= "" then
      local d = decided[i]
      local state = d.behind and "blocked" or (Dedupe.fire(d.spec, now) and "delayed" or "waiting")
      held[key] = {id = id, mode = d.spec.mode, window = d.spec.window, first = now,
        state = state, lane = job[5], index = i, extra = d.behind}
      if d.spec.mode == "debounce" then job[6], job[7] = d.spec.window, -1 end
    end
    if job[14] ~= "" then Tags.read(job[14]) end
    read_lane(lanes, job[5])
    local lane = job[5]
    if controls then
      if not adding[lane] then adding_order[#adding_order + 1] = lane end
      adding[lane] = (adding[lane] or 0) + 1
    end
  end
end
-- max_waiting: a lane may not hold more waiting + delayed + blocked jobs (the
-- whole batch is refused, nothing written)
-- (only a queue that set a lane control can have one: includes/fixed.lua)
for _, lane in ipairs(adding_order) do
  local f = redis.call("HMGET", K_LANECTL, "m:" .. lane, "d:" .. lane)
  local most = tonumber(f[1])
  if most then
    local held = redis.call("ZCARD", lane_key(lane)) + (tonumber(f[2]) or 0)
    if held + adding[lane] > most then return {E_LANE_FULL, lane, held, adding[lane], most} end
  end
end

-- write phase
apply_renumber(renumber_step)
if not stored then
  redis.call("HSET", K_META, "o", requested)
  META.stamp_new()
end
-- a batch takes its counters with one write; a lone job INCRs (arrival_score)
if requested == "composite" and #jobs > 1 then reserve_arrivals(#jobs) end
local created = 0
local added_to = joining and {}  -- batch id -> children added so far (their places)
for i, job in ipairs(jobs) do
  if not ids[i] then
    local id, key = job[1], job[9]
    local tier, lane, delay, run_at = job[4], job[5], job[6], job[7]
    local fire = -1
    if run_at >= 0 then fire = run_at elseif delay > 0 then fire = now + delay end
    -- unset fields read as their defaults: a (attempts) 0, g (lane) the default lane
    local attempts = job[8] < 0 and (OPT.max_attempts or -job[8]) or job[8]
    local fields, n
    if #job[3] <= Text.PIECE then  -- (most payloads: one field, no call)
      fields, n = {"n", job[2], "d", job[3], "p", tier, "m", attempts, "c", created_at}, 10
    else
      fields = {"n", job[2], "p", tier, "m", attempts, "c", created_at}
      n = Text.put_payload(fields, 8, job[3])
    end
    if lane ~= "" then
      fields[n + 1], fields[n + 2], n = "g", lane, n + 2
      META.mark("fj")  -- (the feature word, includes/fixed.lua: a job field check_lease reads)
    end
    if key ~= "" then
      fields[n + 1], fields[n + 2], n = "k", key, n + 2
      META.mark("fk")
      Dedupe.hold(key, id, decided[i].spec, now, decided[i].behind)
    end
    if job[10] >= 0 then
      fields[n + 1], fields[n + 2], n = "x", fmt(now + job[10]), n + 2
    end
    if job[11] ~= "" then
      fields[n + 1], fields[n + 2], n = "h", job[11], n + 2
    end
    if job[12] ~= "" then
      fields[n + 1], fields[n + 2], n = "dd", job[12], n + 2
    end
    if job[13] ~= "" then
      fields[n + 1], fields[n + 2], n = "df", job[13], n + 2
    end
    if job[14] ~= "" then
      fields[n + 1], fields[n + 2], n = "tg", job[14], n + 2
      META.mark("ft")
      Tags.index(id, job[14], created_at)
    end
    local bid = job[16]
    if bid and bid ~= "" then
      fields[n + 1], fields[n + 2], n = "b", bid, n + 2
      META.mark("fb")
      added_to[bid] = (added_to[bid] or 0) + 1
      local place = Batch.num(Batch.seen[bid], "t") + added_to[bid]
      redis.call("ZADD", Batch.jobs_key(bid), place, id)
    end
    -- retention keeps a completed dependency until its readers finish (includes/readers.lua)
    local done_deps = reads_of and reads_of[i]
    for d = 1, done_deps and #done_deps or 0 do
      redis.call("SADD", readers_key(done_deps[d]), id)
      redis.call("HSET", job_key(done_deps[d]), "dn", "1")
      META.mark("fd")
    end
    local pending = blocked_on and blocked_on[i]
    if pending and #pending > 0 then
      fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "s", "blocked", "dp", #pending
      redis.call("HSET", job_key(id), unpack(fields))
      redis.call("ZADD", K_BLOCKED, created_at, id)
      count_delayed(lane, 1)  -- max_waiting counts it (includes/controls.lua)
      for _, dep in ipairs(pending) do
        redis.call("SADD", dependents_key(dep), id)
        -- it has dependents: see completeMany (a batch: Batch.release)
        if Batch.is_id(dep) then
          Batch.seen[dep].f.dn = "1"
          redis.call("HSET", Batch.key(dep), "dn", "1")
        else
          redis.call("HSET", job_key(dep), "dn", "1")
          META.mark("fd")
        end
      end
      emit("added", id, lane)
    elseif fire > now then
      local at = fmt(fire)
      fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "s", "delayed", "at", at
      ring_if_earliest(fire)
      redis.call("ZADD", K_DELAYED, at, id)
      count_delayed(lane, 1)
      redis.call("HSET", job_key(id), unpack(fields))
      emit("added", id, lane, "nx", at)
    else
      local score = fmt(arrival_score(requested, tier, now))
      fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "s", "waiting", "sc", score
      redis.call("HSET", job_key(id), unpack(fields))
      enter_lane(lane, id, score)
      emit("added", id, lane)
    end
    ids[i] = id
    created = created + 1
  elseif decided and decided[i] and decided[i].outcome then
    local d = decided[i]
    local at = nil
    if d.outcome == "replaced" and not d.rec.index then at = Dedupe.replace(d, d.spec, job[3], now) end
    emit("deduplicated", d.kept, d.lane, "o", d.outcome, "nx", at)
  end
end
for b = 1, joining_order and #joining_order or 0 do
  local bid = joining_order[b]
  Batch.moved(bid, {t = added_to[bid]}, nil, now)
end
if created > 0 then
  META.add("added", created)
  META.put("last", created_at) -- last activity (stats)
end
flush_waiting(nil, lanes)  -- no lane was written since read_lane read it
flush_events()
return ids

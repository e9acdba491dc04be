-- fireSchedules: fire due schedules, each a compare-and-set on its stored
-- next fire time, so each fire time adds one job however many workers race.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     ordering the client opened the queue with: "composite" | "mint" | "aged"
-- ARGV[8]     the fires, one JSON array of arrays: [schedule id, revision read,
--             fire time ms (the stored next fire time read), next fire time ms
--             (computed by the client from the server time it read), new job
--             id, skip ("" = add the job, else why not: "missed")]
--
-- A fire whose schedule is gone, was replaced (revision) or whose stored next
-- fire time is no longer the one read (another firer took it, or it was
-- paused) does nothing. Otherwise it stores the next fire time and either
-- adds the job (waiting now, with fields si = schedule id and sf = fire time)
-- or counts a skip (an event "skipped" whose job id is the schedule id): if
-- told to (missed), if the schedule skips while its previous fire's job is
-- still waiting, delayed, retrying or active (running), or if the job's lane
-- holds its max_waiting already (lane-full).
--
-- Returns: {outcomes, earliest next fire ms of the queue or -1, now ms}; one
--          outcome per fire: the job id, "skipped:<why>", or "" (not this firer's).
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include schedules

local now = now_ms()
local stored_order = redis.call("HGET", K_META, "o")
local order = stored_order or ARGV[7]
local fires = cjson.decode(ARGV[8])
local RUNNING = {waiting = true, delayed = true, active = true, failed = true}

-- a lane's max_waiting (lane controls): a fire into a full lane is skipped
local room = {}   -- lane -> jobs it may still take in this call (false: no limit)
local function lane_room(lane)
  if room[lane] == nil then
    local f = redis.call("HMGET", K_LANECTL, "m:" .. lane, "d:" .. lane)
    local most = tonumber(f[1])
    room[lane] = most and most - read_key("ZCARD", lane_key(lane)) - (tonumber(f[2]) or 0) or false
  end
  return room[lane]
end

-- read phase: each schedule, its next fire time, its last fire and that job
local plans, seen, lanes = {}, {}, {}
for i, f in ipairs(fires) do
  local id = f[1]
  local raw = not seen[id] and redis.call("HGET", K_SCHEDULES, id)
  seen[id] = true
  local score = raw and redis.call("ZSCORE", K_FIRES, id)
  if score and fmt(tonumber(score)) == f[3] then
    local def = cjson.decode(raw)
    if fmt(tonumber(def.r)) == fmt(tonumber(f[2])) then
      local state = fire_state(id)
      local skip = f[6]
      if skip == "" and tonumber(def.o) == 1 and state.j then
        if RUNNING[read_key("HGET", job_key(state.j), "s") or ""] then skip = "running" end
      end
      if skip == "" then
        if read_key("EXISTS", job_key(f[5])) == 1 then skip = "id-taken" end
        read_lane(lanes, def.g)
        local left = lane_room(def.g or "")
        if left and left <= 0 then
          skip = "lane-full"
        elseif left then
          room[def.g or ""] = left - 1
        end
      end
      plans[i] = {def = def, state = state, skip = skip}
    end
  end
end

-- write phase
local out, added = {}, 0
for i, f in ipairs(fires) do
  local plan = plans[i]
  if not plan then
    out[i] = ""
  else
    local id, state, def = f[1], plan.state, plan.def
    if plan.skip ~= "" then
      state.k = (tonumber(state.k) or 0) + 1
      state.ks = plan.skip
      out[i] = "skipped:" .. plan.skip
      -- an event for the fire that added nothing: its job id column holds the schedule id
      emit("skipped", id, plan.def.g, "e", plan.skip)
    else
      if not stored_order then
        redis.call("HSET", K_META, "o", order)
        META.stamp_new()
        stored_order = order
      end
      local job_id, tier, lane = f[5], tonumber(def.p) or 0, def.g or ""
      -- max_attempts -n: none given, the stored setting at the fire, else n (as add.lua)
      local attempts = tonumber(def.m)
      if attempts < 0 then attempts = OPT.max_attempts or -attempts end
      local score = fmt(arrival_score(order, tier, now))
      local fields = {"n", def.n, "p", tier, "m", attempts, "c", fmt(now),
        "si", id, "sf", f[3], "s", "waiting", "sc", score}
      Text.put_payload(fields, #fields, def.d)
      if lane ~= "" then
        fields[#fields + 1] = "g"
        fields[#fields + 1] = lane
        META.mark("fj")  -- (the feature word, includes/fixed.lua)
      end
      redis.call("HSET", job_key(job_id), unpack(fields))
      enter_lane(lane, job_id, score)
      emit("scheduled", job_id, lane)
      state.t, state.j = f[3], job_id
      added = added + 1
      out[i] = job_id
    end
    redis.call("HSET", K_FIRED, id, cjson.encode(state))
    redis.call("ZADD", K_FIRES, f[4], id)
  end
end
if added > 0 then
  redis.call("HINCRBY", K_META, "added", added)
  redis.call("HSET", K_META, "last", fmt(now))
end
flush_waiting()
flush_events()
local first = redis.call("ZRANGE", K_FIRES, 0, 0, "WITHSCORES")
return {out, first[2] and fmt(tonumber(first[2])) or "-1", fmt(now)}

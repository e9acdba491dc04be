-- Schedules (echomq/schedules.py): definitions in K_SCHEDULES (id -> JSON:
-- n name, d data JSON text, p tier, g lane, m max_attempts, z zone, t0 anchor,
-- o skip_if_running, cu catch_up, r revision, c cron | e every_ms), next fire
-- times in K_FIRES (absent while paused), last fires in K_FIRED (id -> JSON:
-- t last fire time, j its job id, k fires skipped, ks why the last was
-- skipped, pa paused).

-- A schedule's last-fire record (an empty table when it never fired).
local function fire_state(id)
  local raw = redis.call("HGET", K_FIRED, id)
  if raw then return cjson.decode(raw) end
  return {}
end

-- The revision of a stored definition (0: no such schedule).
local function schedule_revision(raw)
  if not raw then return 0 end
  return tonumber(cjson.decode(raw).r) or 0
end

-- Idle workers sleep until the earliest fire time they know of: a schedule
-- that now fires before every other one rings the doorbell, so a worker wakes
-- and re-reads it (call before the ZADD).
local function ring_if_first_fire(fire_ms)
  local first = redis.call("ZRANGE", K_FIRES, 0, 0, "WITHSCORES")
  if not first[2] or tonumber(fire_ms) < tonumber(first[2]) then ring_doorbell() end
end

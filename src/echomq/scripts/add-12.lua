-- add: put a batch of new jobs into their lanes (or the delayed set).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     ordering the client opened the queue with: "composite" | "mint"
-- ARGV[8..]   nine values per job:
--             id, name, data (JSON), tier, lane ("" = default),
--             delay_ms (-1 = none), run_at_ms (-1 = none), max_attempts,
--             idempotency key ("" = none)
--
-- Returns: the list of ids, one per job (an existing job's id where its
--          idempotency key is still alive; a job whose id exists already is
--          left as it is: a client's retry after a lost reply, e.g. in a
--          failover, must not add or reset it twice), or
--          E_ORDERING (-3) if the queue exists with the other ordering.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include retention

local requested = ARGV[7]
local stored = redis.call("HGET", K_META, "o")
if not stored then
  redis.call("HSET", K_META, "o", requested)
elseif stored ~= requested then
  return E_ORDERING
end

local now = now_ms()
local ids = {}
local created = 0
for i = 8, #ARGV, 9 do
  local id, key = ARGV[i], ARGV[i + 8]
  local existing = nil
  if key ~= "" then
    existing = redis.call("GET", idem_key(key))
    if existing and redis.call("EXISTS", job_key(existing)) == 0 then existing = nil end
  end
  if not existing and redis.call("EXISTS", job_key(id)) == 1 then existing = id end
  if existing then
    ids[#ids + 1] = existing
  else
    local tier, lane = tonumber(ARGV[i + 3]), ARGV[i + 4]
    local delay, run_at = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
    local fire = -1
    if run_at >= 0 then fire = run_at elseif delay > 0 then fire = now + delay end
    local jk = job_key(id)
    local fields = {"n", ARGV[i + 1], "d", ARGV[i + 2], "p", ARGV[i + 3], "g", lane,
      "a", 0, "m", ARGV[i + 7], "c", fmt(now)}
    if key ~= "" then
      fields[#fields + 1] = "k"
      fields[#fields + 1] = key
      redis.call("SET", idem_key(key), id)
    end
    local score = nil
    if fire > now then
      fields[#fields + 1] = "s"
      fields[#fields + 1] = "delayed"
      fields[#fields + 1] = "at"
      fields[#fields + 1] = fmt(fire)
      ring_if_earliest(fire)
      redis.call("ZADD", K_DELAYED, fmt(fire), id)
    else
      score = arrival_score(requested, tier)
      fields[#fields + 1] = "s"
      fields[#fields + 1] = "waiting"
      fields[#fields + 1] = "sc"
      fields[#fields + 1] = fmt(score)
    end
    redis.call("HSET", jk, unpack(fields))
    if score then enter_lane(lane, id, score) end
    ids[#ids + 1] = id
    created = created + 1
  end
end
if created > 0 then redis.call("HINCRBY", K_META, "added", created) end
flush_waiting()
return ids

-- The timed transitions that run before every claim and in maintenance:
-- due delayed jobs become waiting, expired leases come back or die.
local STEP = 500  -- due or expired jobs read per round

-- Promote every due delayed job into its lane; returns how many.
local function promote_due(now)
  local order = nil
  local promoted = 0
  while true do
    local due = redis.call("ZRANGEBYSCORE", K_DELAYED, "-inf", fmt(now), "LIMIT", 0, STEP)
    if #due == 0 then break end
    order = order or ordering()
    for _, id in ipairs(due) do
      redis.call("ZREM", K_DELAYED, id)
      redis.call("ZREM", K_RETRYING, id)
      local jk = job_key(id)
      local f = redis.call("HMGET", jk, "p", "g")
      if f[1] then
        local score = fmt(arrival_score(order, tonumber(f[1])))
        redis.call("HSET", jk, "s", "waiting", "sc", score)
        enter_lane(f[2], id, score)
        promoted = promoted + 1
      end
    end
  end
  return promoted
end

-- Return every expired lease: back to waiting at its old place (stalls + 1),
-- or dead once its stalls pass max_stalls. Returns how many were handled.
local function reap_expired(now)
  local reaped = 0
  while true do
    local expired = redis.call("ZRANGEBYSCORE", K_ACTIVE, "-inf", fmt(now), "LIMIT", 0, STEP)
    if #expired == 0 then break end
    for _, id in ipairs(expired) do
      redis.call("ZREM", K_ACTIVE, id)
      local jk = job_key(id)
      if redis.call("EXISTS", jk) == 1 then
        local stalls = redis.call("HINCRBY", jk, "st", 1)
        if stalls > OPT.max_stalls then
          bury(id, now, "stalled: lease expired " .. stalls .. " times")
        else
          local f = redis.call("HMGET", jk, "g", "sc")
          redis.call("HSET", jk, "s", "waiting")
          enter_lane(f[1], id, f[2])
        end
        reaped = reaped + 1
      end
    end
  end
  return reaped
end

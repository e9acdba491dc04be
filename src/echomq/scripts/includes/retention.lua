-- Removing finished jobs: the hash, its idempotency key and its set entry.
local PRUNE_BUDGET = 1000  -- most jobs one call removes, so no call runs long

local function drop_job(id)
  local jk = job_key(id)
  local key = redis.call("HGET", jk, "k")
  if key and redis.call("GET", idem_key(key)) == id then
    redis.call("DEL", idem_key(key))
  end
  redis.call("DEL", jk)
end

-- Remove the jobs of a finished set past its age or count; returns how many.
local function prune(zkey, keep_ms, keep_count, now)
  local removed = 0
  local old = redis.call("ZRANGEBYSCORE", zkey, "-inf", "(" .. fmt(now - keep_ms),
    "LIMIT", 0, PRUNE_BUDGET)
  for _, id in ipairs(old) do
    drop_job(id)
    redis.call("ZREM", zkey, id)
    removed = removed + 1
  end
  local excess = redis.call("ZCARD", zkey) - keep_count
  if excess > 0 then
    local n = math.min(excess, PRUNE_BUDGET - removed)
    if n > 0 then
      for _, id in ipairs(redis.call("ZRANGE", zkey, 0, n - 1)) do
        drop_job(id)
        redis.call("ZREM", zkey, id)
        removed = removed + 1
      end
    end
  end
  return removed
end

local function bury(id, now, err)
  local jk = job_key(id)
  redis.call("HSET", jk, "s", "dead", "f", fmt(now))
  if err then redis.call("HSET", jk, "e", err) end
  redis.call("HDEL", jk, "l")
  redis.call("ZADD", K_DEAD, fmt(now), id)
  prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now)
end

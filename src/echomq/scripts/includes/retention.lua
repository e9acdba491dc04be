-- Finished jobs: dead letters, and pruning finished sets by age and count.
--
-- An idempotency key outlives its job's completion by the retention age: it
-- is given that TTL when the job completes or dies (add also checks that the
-- job it names still exists), so pruning never has to look it up.
local PRUNE_BUDGET = 1000  -- most jobs one call removes, so no call runs long

-- Give a finished job's idempotency key the retention age as its TTL.
local function expire_idem(key, ttl_ms)
  if key and key ~= "" then
    redis.call("PEXPIRE", idem_key(key), math.max(1, ttl_ms))
  end
end

-- Remove the jobs of a finished set past its age or count; returns how many.
-- The victims are always the lowest ranks (oldest first), so one
-- ZREMRANGEBYRANK removes them from the set.
local function prune(zkey, keep_ms, keep_count, now)
  local victims = redis.call("ZRANGEBYSCORE", zkey, "-inf", "(" .. fmt(now - keep_ms),
    "LIMIT", 0, PRUNE_BUDGET)
  local excess = redis.call("ZCARD", zkey) - #victims - keep_count
  local room = PRUNE_BUDGET - #victims
  if excess > 0 and room > 0 then
    local first = #victims
    for _, id in ipairs(redis.call("ZRANGE", zkey, first, first + math.min(excess, room) - 1)) do
      victims[#victims + 1] = id
    end
  end
  if #victims == 0 then return 0 end
  for i = 1, #victims, 500 do
    local hashes = {}
    for j = i, math.min(i + 499, #victims) do hashes[#hashes + 1] = job_key(victims[j]) end
    redis.call("DEL", unpack(hashes))
  end
  redis.call("ZREMRANGEBYRANK", zkey, 0, #victims - 1)
  return #victims
end

-- Delete one job's hash and its idempotency key (remove).
local function drop_job(id)
  local jk = job_key(id)
  local key = redis.call("HGET", jk, "k")
  if key and redis.call("GET", idem_key(key)) == id then
    redis.call("DEL", idem_key(key))
  end
  redis.call("DEL", jk)
end

local function bury(id, now, err)
  local jk = job_key(id)
  redis.call("HSET", jk, "s", "dead", "f", fmt(now))
  if err then redis.call("HSET", jk, "e", err) end
  expire_idem(redis.call("HGET", jk, "k"), OPT.keep_dead_ms)
  redis.call("ZADD", K_DEAD, fmt(now), id)
  prune(K_DEAD, OPT.keep_dead_ms, OPT.keep_dead, now)
end

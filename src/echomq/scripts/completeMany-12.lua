-- completeMany: record the results of one or more jobs, each only from the
-- holder of its lease; finished jobs past retention are pruned once per call.
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the jobs, one JSON array of [id, lease token the caller holds,
--             result (JSON text)]
--
-- Returns: one value per job, in order: the finish time (ms) when recorded,
--          E_NOT_FOUND (-1) if the job does not exist,
--          E_LEASE_LOST (-2) if the caller no longer holds the lease.
--          A job this same lease already completed (a retry after a lost
--          reply) answers with its finish time again.
-- @include fixed
-- @include keys
-- @include clock
-- @include retention
-- @include lease

local now = now_ms()
local stamp = fmt(now)
local out = {}
local done_ids, done_pairs = {}, {}
for _, item in ipairs(cjson.decode(ARGV[7])) do
  local id, token = item[1], item[2]
  local jk, key_or_err = check_lease(id, token, now)
  if jk then
    redis.call("HSET", jk, "s", "completed", "r", item[3], "f", stamp)
    expire_idem(key_or_err, OPT.keep_completed_ms)
    done_ids[#done_ids + 1] = id
    done_pairs[#done_pairs + 1] = stamp
    done_pairs[#done_pairs + 1] = id
    out[#out + 1] = now
  else
    -- a retried call whose first reply was lost: the same lease already completed it
    local done = key_or_err == E_LEASE_LOST and finished_by(id, token, {completed = true})
    out[#out + 1] = done and tonumber(done[3]) or key_or_err
  end
end
if #done_ids > 0 then
  call_chunked("ZREM", K_ACTIVE, done_ids, 1)
  call_chunked("ZADD", K_COMPLETED, done_pairs, 2)
  redis.call("HINCRBY", K_META, "completed", #done_ids)
  redis.call("HSET", K_META, "last", stamp) -- last activity (stats)
  prune(K_COMPLETED, OPT.keep_completed_ms, OPT.keep_completed, now)
end
return out

-- dependents: the jobs that depend on a job (read-only), for inspect.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     how many ids of each kind to return at most
--
-- Returns: {state, blocked total, {blocked ids}, readers total, {reader ids}}:
--          the blocked jobs still waiting for it (its dependents set), and the
--          dependents it released (or that were added after it completed) that
--          may still read its result (its readers set); at most ARGV[8] ids of
--          each, any of them (SRANDMEMBER: bounded, however many there are).
--          E_NOT_FOUND (-1) when there is no such job.
-- @include fixed
-- @include keys
-- @include readers

local id, most = ARGV[7], tonumber(ARGV[8])
local state = redis.call("HGET", job_key(id), "s")
if not state then return E_NOT_FOUND end
local function some(key)
  local total = redis.call("SCARD", key)
  if total == 0 or most == 0 then return total, {} end
  return total, redis.call("SRANDMEMBER", key, math.min(most, total))
end
local blocked, blocked_ids = some(dependents_key(id))
local readers, reader_ids = some(readers_key(id))
return {state, blocked, blocked_ids, readers, reader_ids}

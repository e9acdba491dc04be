-- jobNames: the names of a few jobs (read-only), for views that show job ids
-- with their names (the dashboard's live events).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7..]   job ids (at most echomq.engine.reads.MAX_NAMES)
--
-- Returns: one name per id, in order; "" for a job that is gone.
-- Work: one HGET per id.
-- @include fixed
-- @include keys

local names = {}
for i = 7, #ARGV do
  names[#names + 1] = redis.call("HGET", job_key(ARGV[i]), "n") or ""
end
return names

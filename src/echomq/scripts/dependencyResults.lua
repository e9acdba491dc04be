-- dependencyResults: the results of the jobs a job depends on (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: {dep1, state1, result1, error1, dep2, ...} in depends_on order
--          ("" for what is not there: a removed or pruned job has no state),
--          or E_NOT_FOUND (-1).
-- @include fixed
-- @include keys

local f = redis.call("HMGET", job_key(ARGV[7]), "s", "dd")
if not f[1] then return E_NOT_FOUND end
local out = {}
if f[2] then
  for _, dep in ipairs(cjson.decode(f[2])) do
    local d = redis.call("HMGET", job_key(dep), "s", "r", "e")
    out[#out + 1] = dep
    out[#out + 1] = d[1] or ""
    out[#out + 1] = d[2] or ""
    out[#out + 1] = d[3] or ""
  end
end
return out

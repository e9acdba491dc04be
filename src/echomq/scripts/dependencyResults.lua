-- dependencyResults: the results of the jobs a job depends on (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
--
-- Returns: {dep1, result1 or "", dep2, ...} in depends_on order ("" when that
--          job is not completed, removed or pruned), or E_NOT_FOUND (-1).
-- @include fixed
-- @include keys

local f = redis.call("HMGET", job_key(ARGV[7]), "s", "dd")
if not f[1] then return E_NOT_FOUND end
local out = {}
if f[2] then
  for _, dep in ipairs(cjson.decode(f[2])) do
    local d = redis.call("HMGET", job_key(dep), "s", "r")
    out[#out + 1] = dep
    out[#out + 1] = (d[1] == "completed" and d[2]) or ""
  end
end
return out

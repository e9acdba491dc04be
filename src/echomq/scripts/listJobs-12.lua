-- listJobs: read a page of jobs from one set, with their hashes (read-only).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     which set: "delayed" | "failed" | "active" | "completed" | "dead"
--             | "lane:<lane>" (waiting jobs of one lane, claim order)
-- ARGV[8]     offset
-- ARGV[9]     count
-- ARGV[10]    "1" for newest first (finished sets), "0" for ascending score
--
-- Returns: a list of {id, field1, value1, ...}, one per job.
-- @include fixed
-- @include keys

local sets = {delayed = K_DELAYED, failed = K_RETRYING, active = K_ACTIVE,
  completed = K_COMPLETED, dead = K_DEAD}
local which = ARGV[7]
local zkey = sets[which]
if not zkey and string.sub(which, 1, 5) == "lane:" then zkey = lane_key(string.sub(which, 6)) end
if not zkey then return {} end
local first, count = tonumber(ARGV[8]), tonumber(ARGV[9])
local ids
if ARGV[10] == "1" then
  ids = redis.call("ZREVRANGE", zkey, first, first + count - 1)
else
  ids = redis.call("ZRANGE", zkey, first, first + count - 1)
end
local out = {}
for _, id in ipairs(ids) do
  local h = redis.call("HGETALL", job_key(id))
  table.insert(h, 1, id)
  out[#out + 1] = h
end
return out

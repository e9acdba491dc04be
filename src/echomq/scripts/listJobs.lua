-- listJobs: read a page of jobs from one set, with their hashes (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     which set: "delayed" | "failed" | "active" | "completed" | "dead"
--             | "blocked"
--             | "lane:<lane>" (waiting jobs of one lane, claim order)
-- ARGV[8]     offset
-- ARGV[9]     count
-- ARGV[10]    "1" for newest first (finished sets), "0" for ascending score
-- ARGV[11]    summary: "0" for whole records; N > 0 for only the fields a list
--             row shows (no payload, result, traceback or progress), the
--             error cut to at most N bytes (at a UTF-8 character boundary)
--
-- Returns: a list of {id, field1, value1, ...}, one per job.
-- @include fixed
-- @include keys
-- @include text

local sets = {delayed = K_DELAYED, failed = K_RETRYING, active = K_ACTIVE,
  completed = K_COMPLETED, dead = K_DEAD, blocked = K_BLOCKED}
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
local SUMMARY = {"n", "s", "p", "g", "a", "m", "sc", "c", "f", "e", "st", "at", "ca", "k"}
local preview = tonumber(ARGV[11] or "0") or 0

local out = {}
for _, id in ipairs(ids) do
  local h
  if preview > 0 then
    local values = redis.call("HMGET", job_key(id), unpack(SUMMARY))
    h = {id}
    for i, name in ipairs(SUMMARY) do
      local v = values[i]
      if v then
        if name == "e" and #v > preview then v = cut_utf8(v, preview) end
        h[#h + 1] = name
        h[#h + 1] = v
      end
    end
  else
    h = redis.call("HGETALL", job_key(id))
    table.insert(h, 1, id)
  end
  out[#out + 1] = h
end
return out

-- listJobs: read a page of jobs from one set, with their hashes (read-only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     which set: "delayed" | "failed" | "active" | "completed" | "dead"
--             | "blocked"
--             | "lane:<lane>" (waiting jobs of one lane, claim order)
-- ARGV[8]     offset (pages by offset; ignored when ARGV[12] is given)
-- ARGV[9]     count
-- ARGV[10]    "1" for newest first (finished sets), "0" for ascending score
-- ARGV[11]    summary: "0" for whole records; N > 0 for only the fields a list
--             row shows (no payload, result, traceback or progress), the
--             error cut to at most N bytes (at a UTF-8 character boundary)
-- ARGV[12]    cursor paging (optional): "-" for the first page, else the cursor
--             the previous page returned (includes/paging.lua)
--
-- Returns: a list of {id, field1, value1, ...}, one per job; with a cursor,
--          {cursor ("" when the set holds nothing after the page), job1, ...}.
--          A cursor page starts after the position where the previous one
--          ended and skips the jobs that page showed: a job that moved on in
--          its set since (a renewed lease, a retry delayed again) is not
--          shown twice in a row.
-- @include fixed
-- @include keys
-- @include text
-- @include paging

local sets = {delayed = K_DELAYED, failed = K_RETRYING, active = K_ACTIVE,
  completed = K_COMPLETED, dead = K_DEAD, blocked = K_BLOCKED, cancelled = K_CANCELLED}
local which = ARGV[7]
local zkey = sets[which]
if not zkey and string.sub(which, 1, 5) == "lane:" then zkey = lane_key(string.sub(which, 6)) end
local cursor = ARGV[12]
if not zkey then return cursor and {""} or {} end
local first, count = tonumber(ARGV[8]), tonumber(ARGV[9])
local desc = ARGV[10] == "1"
local preview = tonumber(ARGV[11] or "0") or 0

local out = {}
if not cursor then
  for _, id in ipairs(redis.call(desc and "ZREVRANGE" or "ZRANGE", zkey, first, first + count - 1)) do
    local row = Paging.row(id, preview)
    -- (a hash gone while listed, dropped by the next claim: an entry with its id only)
    out[#out + 1] = row or {id}
  end
  return out
end

local at, after, seen = Paging.parse(cursor)
local start = at and Paging.start(zkey, at, after, desc) or 0
seen = seen or {}
out[1] = ""
local size = redis.call("ZCARD", zkey)
local shown, last_id, last_at = {}, nil, nil
while #out - 1 < count and start < size do
  local chunk = Paging.range(zkey, start, count - (#out - 1), desc)
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local id = chunk[i]
    start, last_id, last_at = start + 1, id, chunk[i + 1]
    if not seen[id] then
      out[#out + 1] = Paging.row(id, preview) or {id}
      shown[#shown + 1] = id
    end
  end
end
if start < size and last_id then
  out[1] = last_at .. " " .. last_id .. " " .. table.concat(shown, ",")
end
return out

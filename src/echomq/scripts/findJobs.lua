-- findJobs: one page of the jobs that carry every given tag (and the state
-- and name when given), newest first by creation (read-only; DESIGN §10).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the tags, JSON object text (1 to 8 tags: echomq/tags.py)
-- ARGV[8]     state the jobs must be in ("" = any)
-- ARGV[9]     name the jobs must have ("" = any)
-- ARGV[10]    cursor: "" for the first page, else "<created ms> <id>" of the
--             last job the previous page looked at
-- ARGV[11]    count: the most jobs to return
-- ARGV[12]    summary: as listJobs.lua's ARGV[11]
--
-- Returns: {cursor, job1, job2, ...}: each job {id, field1, value1, ...};
--          cursor "" when the index holds nothing after this page.
--
-- Work: the smallest index of the tags asked for is walked newest first
-- (equal creation times: the higher id first); at most LOOK_BUDGET entries
-- are looked at per call, so a page may be shorter than count and still
-- carry a cursor. Each entry costs one read of the job (its state, name
-- and tags checked there). The cursor is a position, not an entry: the page
-- continues after it whatever was added (newer: before it) or removed since.
-- @include fixed
-- @include keys
-- @include text
-- @include paging
-- @include tags

local LOOK_BUDGET = 500  -- ~2.5 ms of server time at most (benchmarks/find_cost.py)
local CHUNK = 100

local wanted = cjson.decode(ARGV[7])
local state, name = ARGV[8], ARGV[9]
local count, preview = tonumber(ARGV[11]), tonumber(ARGV[12]) or 0

-- the driving index: the smallest
local index, size
for k, v in pairs(wanted) do
  local key = Tags.key(k, v)
  local n = redis.call("ZCARD", key)
  if not size or n < size or (n == size and key < index) then index, size = key, n end
end
if size == 0 then return {""} end

-- where the page starts: the reverse rank of the first entry after the cursor
local start = 0
local at, after = Paging.parse(ARGV[10])
if at then start = Paging.start(index, at, after, true) end

local out = {""}
local looked, last_id, last_at = 0, nil, nil
while looked < LOOK_BUDGET and #out - 1 < count and start < size do
  local chunk = Paging.range(index, start, CHUNK, true)
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local id = chunk[i]
    looked, start = looked + 1, start + 1
    last_id, last_at = id, chunk[i + 1]
    local row, h = Paging.row(id, preview)
    local ok = row ~= nil
    if ok and state ~= "" and h.s ~= state then ok = false end
    if ok and name ~= "" and h.n ~= name then ok = false end
    if ok then
      local tags = h.tg and cjson.decode(h.tg) or {}
      for k, v in pairs(wanted) do
        if tags[k] ~= v then ok = false break end
      end
    end
    if ok then
      out[#out + 1] = row
      if #out - 1 >= count then break end
    end
    if looked >= LOOK_BUDGET then break end
  end
end
if start < size and last_id then out[1] = last_at .. " " .. last_id end
return out

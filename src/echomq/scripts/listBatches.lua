-- listBatches: one page of the queue's batches, newest first by creation
-- (read-only; the index is includes/batch.lua's Batch.index()).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     cursor: "" for the first page, else "<created ms> <batch id>" of
--             the last batch the previous page looked at (includes/paging.lua)
-- ARGV[8]     count: the most batches to return
--
-- Returns: {cursor, batch1, batch2, ...}: each batch as Batch.summary gives
--          it, {id, field1, value1, ...}: its hash (includes/batch.lua)
--          without the callbacks' job specs; cursor "" when the index holds
--          nothing after this page.
--
-- Work: at most LOOK_BUDGET index entries are looked at per call, each two
-- reads of a small hash (Batch.summary: never the callbacks' payloads); an
-- entry whose batch is gone (expired with its
-- retention, its entry not swept yet by createBatch.lua) is skipped, so a page
-- may be shorter than count and still carry a cursor. The cursor is a
-- position, not an entry: the page goes on after it whatever was made or
-- swept since.
-- (clock and events only because batch.lua records events elsewhere: this
-- script records none.)
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include paging
-- @include batch

local LOOK_BUDGET = 200
local count = tonumber(ARGV[8])
local index = Batch.index()
local size = redis.call("ZCARD", index)
if size == 0 then return {""} end

-- where the page starts: the reverse rank of the first entry after the cursor
local start = 0
local at, after = Paging.parse(ARGV[7])
if at then start = Paging.start(index, at, after, true) end

local out = {""}
local looked, last_id, last_at = 0, nil, nil
while looked < LOOK_BUDGET and #out - 1 < count and start < size do
  local chunk = Paging.range(index, start, math.min(count - (#out - 1), LOOK_BUDGET - looked), true)
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local id = chunk[i]
    looked, start = looked + 1, start + 1
    last_id, last_at = id, chunk[i + 1]
    local row = Batch.summary(id)
    if row then out[#out + 1] = row end
  end
end
if start < size and last_id then out[1] = last_at .. " " .. last_id end
return out

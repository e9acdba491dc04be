-- readEvents: one page of the queue's event stream after a reader's cursor,
-- and whether the stream was trimmed past that cursor (read only).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     cursor: the last event id the reader has ("" = start from now:
--             the page is empty and the cursor is the stream's last id)
-- ARGV[8]     count: most events to return
--
-- Returns: {cursor after the page, missed (1 if events after the cursor were
--          trimmed before the reader got them, else 0), entry1, entry2, ...},
--          each entry {id, {field, value, ...}} as XRANGE returns it.
--
-- Read in one script, the page and the stream's state are one snapshot. The
-- reader missed events when its cursor is older than the oldest retained
-- event and the stream has dropped entries (entries-added > length): the
-- cursor's own event was trimmed, and with it, perhaps, events after it. (The
-- notice is therefore also given when the cursor's event was the very last
-- one trimmed and nothing after it was: trimming keeps no record of which ids
-- it dropped, and max-deleted-entry-id counts XDEL only.)
-- @include fixed

local function id_parts(id)
  local ms, seq = string.match(id, "^(%d+)-(%d+)$")
  if not ms then return tonumber(id) or 0, 0 end
  return tonumber(ms), tonumber(seq)
end

local function id_after(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  return am > bm or (am == bm and as > bs)
end

local cursor, count = ARGV[7], tonumber(ARGV[8])
local info = redis.pcall("XINFO", "STREAM", K_EVENTS)
if type(info) == "table" and info.err then
  -- no stream yet: every event to come is after "0-0"
  if cursor == "" then cursor = "0-0" end
  return {cursor, 0}
end
local last, first, added, length = "0-0", nil, 0, 0
for i = 1, #info, 2 do
  local field, value = info[i], info[i + 1]
  if field == "last-generated-id" then last = value end
  if field == "first-entry" and type(value) == "table" then first = value[1] end
  if field == "entries-added" then added = value end
  if field == "length" then length = value end
end
if cursor == "" then return {last, 0} end
local missed = 0
if first and added > length and id_after(first, cursor) then missed = 1 end
local page = redis.call("XRANGE", K_EVENTS, "(" .. cursor, "+", "COUNT", count)
local out = {cursor, missed}
for _, entry in ipairs(page) do out[#out + 1] = entry end
if #page > 0 then out[1] = page[#page][1] end
return out

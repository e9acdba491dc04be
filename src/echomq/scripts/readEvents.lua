-- readEvents: one page of the queue's event stream after a reader's cursor,
-- and how many events after that cursor were trimmed before it read them
-- (read only; the stream's layout is described in includes/events.lua).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     cursor: the number of the last event the reader has ("" = start
--             from now: the page is empty and the cursor is the last event's)
-- ARGV[8]     count: most stream entries to return (each holds up to 500 events)
--
-- Returns: {cursor after the page, missed (events after the cursor that are
--          gone), entry1, entry2, ...}, each entry {id, {field, value, ...}}
--          as XRANGE returns it. The first entry may also hold events at or
--          before the cursor (the reader skips them).
-- @include fixed

-- the event number an entry id stands for, as its decimal digits
local function digits_of(id)
  return string.match(id, "^(%d+)")
end

local cursor, count = ARGV[7], tonumber(ARGV[8])
if cursor == "" then
  -- the last event given: the meta hash's counter (includes/events.lua), or
  -- the stream's last entry if that is ahead (a stream an older echomq wrote)
  local given = tonumber(redis.call("HGET", K_META, "ev") or "0")
  local last = redis.call("XREVRANGE", K_EVENTS, "+", "-", "COUNT", 1)
  local stream = last[1] and tonumber(digits_of(last[1][1])) or 0
  return {string.format("%.0f", math.max(given, stream)), 0}
end
local after = tonumber(cursor)
local missed = 0
local oldest = redis.call("XRANGE", K_EVENTS, "-", "+", "COUNT", 1)[1]
if oldest then
  local fields = oldest[2]
  local size = 0
  for i = 1, #fields, 2 do
    if fields[i] == "n" then size = tonumber(fields[i + 1]) end
  end
  local first_kept = tonumber(digits_of(oldest[1])) - size + 1
  if first_kept > after + 1 then missed = first_kept - after - 1 end
end
local page = redis.call("XRANGE", K_EVENTS, "(" .. cursor .. "-0", "+", "COUNT", count)
local out = {cursor, missed}
for _, entry in ipairs(page) do out[#out + 1] = entry end
if #page > 0 then out[1] = digits_of(page[#page][1]) end
return out

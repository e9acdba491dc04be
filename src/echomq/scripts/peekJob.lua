-- peekJob: one job with its large fields cut short (read-only), for inspectors:
-- only the first bytes of a big payload cross the wire.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     job id
-- ARGV[8]     preview: the most bytes of a cut field returned (> 0)
-- ARGV[9..]   the fields that may be cut (payloads, error, traceback); every
--             other field is returned whole (they are short by their limits)
--
-- Returns: {} when there is no such job, else {fields, cuts}: fields is
--          {name1, value1, ...} as HGETALL gives them, a cut field's value
--          being its first ARGV[8] bytes or fewer (at a UTF-8 character
--          boundary); cuts is {name, full size in bytes, ...} for each cut field.
--          Work: one HKEYS, one HMGET, and an HSTRLEN for each field that may
--          be cut (and an HGET for each longer than the preview: the server
--          reads it whole once, the reply carries only its first bytes); a
--          payload stored in pieces, one HMGET of them.
-- @include fixed
-- @include keys
-- @include text

local jk, preview = job_key(ARGV[7]), tonumber(ARGV[8])
local may_cut = {}
for i = 9, #ARGV do may_cut[ARGV[i]] = true end
local names = redis.call("HKEYS", jk)
if #names == 0 then return {} end
local fields, cuts, short = {}, {}, {}
-- a payload in pieces (includes/text.lua) is joined, then cut as one field
local pieces = 0
for _, name in ipairs(names) do pieces = math.max(pieces, Text.PIECE_AT[name] or 0) end
for _, name in ipairs(names) do
  local piece = pieces > 1 and Text.PIECE_AT[name]
  local size = not piece and may_cut[name] and redis.call("HSTRLEN", jk, name) or 0
  if piece == 1 then
    local data = Text.join_payload(redis.call("HMGET", jk, unpack(Text.PIECE_NAMES, 1, pieces)))
    fields[#fields + 1] = name
    if may_cut[name] and #data > preview then
      fields[#fields + 1] = Text.cut_utf8(data, preview)
      cuts[#cuts + 1] = name
      cuts[#cuts + 1] = #data
    else
      fields[#fields + 1] = data
    end
  elseif piece then  -- (joined into "d")
  elseif size > preview then
    fields[#fields + 1] = name
    fields[#fields + 1] = Text.cut_utf8(redis.call("HGET", jk, name), preview)
    cuts[#cuts + 1] = name
    cuts[#cuts + 1] = size
  else
    short[#short + 1] = name
  end
end
if #short > 0 then
  local values = redis.call("HMGET", jk, unpack(short))
  for i, name in ipairs(short) do
    if values[i] then
      fields[#fields + 1] = name
      fields[#fields + 1] = values[i]
    end
  end
end
return {fields, cuts}

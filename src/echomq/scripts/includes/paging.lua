-- Cursor paging over a sorted set (findJobs.lua, listJobs.lua; echomq/tags.py).
--
-- A cursor names a position, not an entry: the entry (score ``at``, member
-- ``after``) the previous page ended on. The next page starts with the entry
-- that follows it in the page order (ascending: score, then member; newest
-- first: the reverse), whether that entry is still in the set or not: while
-- it is there (at the same score) its rank says where; once it is gone the
-- entries on either side of its score are counted (ZCOUNT) and the band of
-- entries with exactly its score, which the set keeps sorted by member, is
-- bisected by rank. Bounded work: a few commands and O(log n) each.
local Paging = {}

-- The rank (0-based, in page order: ZRANGE's, or ZREVRANGE's when ``desc``)
-- of the first entry after the cursor position (``at``, ``after``).
function Paging.start(key, at, after, desc)
  local score = redis.call("ZSCORE", key, after)
  if score and tonumber(score) == tonumber(at) then
    return redis.call(desc and "ZREVRANK" or "ZRANK", key, after) + 1
  end
  local below = redis.call("ZCOUNT", key, "-inf", "(" .. at)
  local band = redis.call("ZCOUNT", key, at, at)
  local lo, hi = 0, band  -- band entries with member <= after: lo of them
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call("ZRANGE", key, below + mid, below + mid)[1]
    if m <= after then lo = mid + 1 else hi = mid end
  end
  if desc then return redis.call("ZCARD", key) - below - lo end
  return below + lo
end

-- Up to ``n`` entries from page rank ``from``: {member, score, member, score, ...}.
function Paging.range(key, from, n, desc)
  return redis.call(desc and "ZREVRANGE" or "ZRANGE", key, from, from + n - 1, "WITHSCORES")
end

-- A cursor as findJobs.lua and listJobs.lua take it: "<score> <member>" and,
-- for listJobs, " <id>,<id>,…" the members the page showed (none are shown
-- again on the next page). Returns at, after, the set of shown members (nil:
-- no cursor, the first page).
function Paging.parse(cursor)
  local at, after, shown = string.match(cursor, "^(%S+) (%S+) ?(%S*)$")
  if not at then return nil end
  local seen = {}
  for id in string.gmatch(shown, "[^,]+") do seen[id] = true end
  return at, after, seen
end

-- The fields a list row shows (a summary: no payload, result, traceback or progress).
Paging.SUMMARY = {"n", "s", "p", "g", "a", "m", "sc", "c", "f", "e", "st", "at", "ca", "k", "tg"}

-- One job as a listing returns it: {id, field1, value1, ...} (``preview`` > 0:
-- only Paging.SUMMARY, the error cut to ``preview`` bytes; else every field),
-- and its fields by name (nil: no such job).
function Paging.row(id, preview)
  local row, h = {id}, {}
  if preview > 0 then
    local values = redis.call("HMGET", job_key(id), unpack(Paging.SUMMARY))
    for i, name in ipairs(Paging.SUMMARY) do
      local v = values[i]
      if v then
        if name == "e" and #v > preview then v = Text.cut_utf8(v, preview) end
        row[#row + 1], row[#row + 2], h[name] = name, v, v
      end
    end
  else
    local flat = redis.call("HGETALL", job_key(id))
    for i = 1, #flat, 2 do
      row[#row + 1], row[#row + 2], h[flat[i]] = flat[i], flat[i + 1], flat[i + 1]
    end
  end
  if #row == 1 then return nil end
  return row, h
end

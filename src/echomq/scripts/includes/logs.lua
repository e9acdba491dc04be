-- Job logs (echomq/joblogs.py, DESIGN §10 "Job logs").
--
-- A job's log is the list Logs.key(id), oldest line first, each line the
-- text "<at ms> <attempt> <LEVEL> <message>" (at: the server clock, the
-- time the worker saw the record, sent as its age). A worker sends a job's
-- lines with the calls it makes anyway: its heartbeat (extendMany.lua) and
-- the job's outcome (completeMany.lua, fail.lua, release.lua), each a log
-- entry {attempt, lines the worker dropped, {age ms, level, message}, ...}.
-- The job's field lg says it has a log: "<bytes> <dropped> <drop ms>
-- <drop attempt>" (the bytes of the kept lines, how many older lines were
-- dropped, when and in which attempt the last were), written by the HSET of
-- the job that call makes anyway. A job without lg has no log, so deleting
-- it (includes/retention.lua) reads and deletes nothing more, and a queue
-- whose handlers log nothing runs no command for logs (DESIGN §9).
--
-- Capped: at most MAX_LINES lines (MAX_LINES - 1 and the line q.logs adds
-- to say how many were dropped, once some were) and MAX_BYTES bytes of
-- lines; the oldest go first. A worker never sends more than one cap's
-- worth for a job in one call (echomq/joblogs.py), so a call's work is bounded.
local Logs = {}
Logs.MAX_LINES = 1000
Logs.MAX_BYTES = 262144
Logs.TRIM_CHUNK = 64  -- lines read at once while trimming by bytes

function Logs.key(id) return PREFIX .. "log:" .. id end

-- The field lg as a table (absent: an empty log).
function Logs.parse(lg)
  local bytes, dropped, at, attempt = string.match(lg or "", "^(%d+) (%d+) (%d+) (%d+)$")
  return {bytes = tonumber(bytes) or 0, dropped = tonumber(dropped) or 0,
    at = at or "0", attempt = attempt or "0"}
end

-- Read phase of a call that appends to job ``id``'s log: its length (the
-- list read before the first write); ``lg`` its field lg as the call read it.
function Logs.read(id, lg)
  local st = Logs.parse(lg)
  st.n = read_key("LLEN", Logs.key(id))
  return st
end

-- Read phase of a deletion: the log of a job with the field lg (nil: none).
function Logs.read_gone(id, lg)
  if lg then read_key("EXISTS", Logs.key(id)) end
end

-- Write phase: append ``entry`` to the log ``st`` (Logs.read) of job ``id``
-- and drop the oldest lines past the caps; returns the job's new field lg
-- (the caller writes it with its own HSET of the job).
function Logs.append(id, st, entry, now)
  local key = Logs.key(id)
  META.mark("fo")  -- its job's field lg (the feature word, includes/fixed.lua)
  local attempt = tostring(math.floor(tonumber(entry[1]) or 0))
  local dropped = st.dropped + math.max(0, math.floor(tonumber(entry[2]) or 0))
  local bytes, lines = st.bytes, {}
  for i = 3, #entry do
    local l = entry[i]
    local line = fmt(now - math.max(0, tonumber(l[1]) or 0)) .. " " .. attempt .. " "
      .. tostring(l[2]) .. " " .. tostring(l[3])
    lines[#lines + 1] = line
    bytes = bytes + #line
  end
  if #lines > 0 then call_chunked("RPUSH", key, lines, 1) end
  local n = st.n + #lines
  local before = dropped
  local cap = Logs.MAX_LINES
  if dropped > 0 or n > cap then cap = cap - 1 end  -- a place for the "dropped" line
  if n > cap then
    local popped = redis.call("LPOP", key, n - cap)
    for _, line in ipairs(popped) do bytes = bytes - #line end
    dropped, n = dropped + #popped, n - #popped
  end
  while bytes > Logs.MAX_BYTES and n > 0 do
    local head = redis.call("LRANGE", key, 0, Logs.TRIM_CHUNK - 1)
    local k = 0
    for _, line in ipairs(head) do
      if bytes <= Logs.MAX_BYTES then break end
      bytes, k = bytes - #line, k + 1
    end
    if k == 0 then break end  -- (a field lg out of step with the list: never loop)
    redis.call("LTRIM", key, k, -1)
    dropped, n = dropped + k, n - k
  end
  if dropped > before then st.at, st.attempt = fmt(now), attempt end
  st.n, st.bytes, st.dropped = n, bytes, dropped
  return fmt(bytes) .. " " .. fmt(dropped) .. " " .. st.at .. " " .. st.attempt
end

-- The queue's event stream (K_EVENTS, docs/lifecycle.md "Events"): every
-- transition script records one event per job it moves, in the same script,
-- so a reader sees exactly the transitions that happened, in their order.
--
-- Events are numbered 1, 2, 3, … in the order they happen. A script collects
-- its events (emit) and writes them at its end (flush_events) as one stream
-- entry per EVENTS_PER_ENTRY events: the entry's id is "<number of its last
-- event>-0", its fields t (server time, ms), n (events in it) and e (a JSON
-- array of events, each [kind, job id, lane ("" = default), field, value,
-- …]). One XADD per call, not per job: a batch of 1,000 adds costs one
-- entry. An event's fields: a (attempt), e (error, cut to ERROR_BYTES),
-- rs (result size, bytes), nx (next run time, ms), st (stalls), pg (progress
-- JSON, only when at most PROGRESS_BYTES).
--
-- Length: the stored setting event_stream_length (K_SETTINGS; absent: the
-- default below; 0: no event is written at all) counts events. Entry ids
-- are event numbers, so "keep the last N events" is XADD MINID ~ (last - N
-- + 1): the server drops whole stream nodes (100 entries by default) whose
-- ids are all below it, O(1) amortized; the stream keeps at least N events.
--
-- K_SETTINGS is read when this include runs (before the script's first
-- write); K_EVENTS is read only in flush_events, after the script's writes:
-- it is a fixed key declared in KEYS, which the server checks before the
-- script starts (includes/fixed.lua), so it cannot be missing mid-script.
local EVENTS_DEFAULT_LENGTH = 10000
local EVENTS_PER_ENTRY = 500
local ERROR_BYTES = 200
local PROGRESS_BYTES = 200

local EVENTS_LENGTH = tonumber(redis.call("HGET", K_SETTINGS, "event_stream_length") or "")
  or EVENTS_DEFAULT_LENGTH
local event_buffer = {}

-- Record one event of this call. ``lane`` nil or "" is the default lane;
-- ``extra`` a flat list of further field, value pairs (nil: none).
local function emit(kind, id, lane, extra)
  if EVENTS_LENGTH <= 0 then return end
  local event = {kind, id, lane or ""}
  if extra then
    for i = 1, #extra do event[i + 3] = extra[i] end
  end
  event_buffer[#event_buffer + 1] = event
end

-- The number of the stream's last event (0: none yet).
local function last_event_number()
  local last = redis.call("XREVRANGE", K_EVENTS, "+", "-", "COUNT", 1)
  if last[1] then return tonumber(string.match(last[1][1], "^(%d+)")) end  -- exact below 2^53
  if redis.call("EXISTS", K_EVENTS) == 0 then return 0 end
  -- an existing but empty stream (trimmed by hand): go on after its last id
  local info = redis.call("XINFO", "STREAM", K_EVENTS)
  for i = 1, #info, 2 do
    if info[i] == "last-generated-id" then
      return tonumber(string.match(info[i + 1], "^(%d+)"))
    end
  end
  return 0
end

-- Write this call's events (every script that emits calls it before it returns).
local function flush_events()
  local count = #event_buffer
  if count == 0 then return end
  local number = last_event_number()
  local stamp = fmt(now_ms())
  for first = 1, count, EVENTS_PER_ENTRY do
    local chunk = {unpack(event_buffer, first, math.min(first + EVENTS_PER_ENTRY - 1, count))}
    number = number + #chunk
    local keep_from = number - EVENTS_LENGTH + 1
    local id = fmt(number) .. "-0"
    local body = cjson.encode(chunk)
    if keep_from > 1 then
      redis.call("XADD", K_EVENTS, "MINID", "~", fmt(keep_from), id,
        "t", stamp, "n", #chunk, "e", body)
    else
      redis.call("XADD", K_EVENTS, id, "t", stamp, "n", #chunk, "e", body)
    end
  end
  event_buffer = {}
end

-- An error message as events carry it: at most ERROR_BYTES bytes, not cut
-- inside a UTF-8 character (a reader decodes the entry as UTF-8).
local function event_error(err)
  if not err or #err <= ERROR_BYTES then return err or "" end
  local cut = string.sub(err, 1, ERROR_BYTES)
  local i = #cut
  while i > 0 and string.byte(cut, i) >= 0x80 and string.byte(cut, i) < 0xC0 do i = i - 1 end
  local lead = i > 0 and string.byte(cut, i) or 0
  if lead >= 0xC0 then
    local size = (lead >= 0xF0 and 4) or (lead >= 0xE0 and 3) or 2
    if #cut - i + 1 < size then cut = string.sub(cut, 1, i - 1) end
  end
  return cut
end

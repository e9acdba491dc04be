-- The queue's event stream (K_EVENTS, docs/lifecycle.md "Events"): every
-- transition script records one event per job it moves, in the same script,
-- so a reader sees exactly the transitions that happened, in their order.
--
-- Events are numbered 1, 2, 3, … in the order they happen. A script collects
-- its events (emit) and writes them at its end (flush_events) as one stream
-- entry per EVENTS_PER_ENTRY events, so a batch of 1,000 adds costs one XADD,
-- not 1,000. The entry's id is "<number of its last event>-0"; its fields
-- are columns, one value per event, in event order:
--   t  server time of the call (ms), n  number of events in the entry,
--   k  kinds, j  job ids, g  lanes ("" = the default lane), each joined by
--      spaces (none of them can hold a space),
--   a (attempt), rs (result size, bytes), nx (next run time, ms), st (stalls):
--      joined by spaces, "" where an event has none (columns no event of the
--      entry has are left out),
--   e (error, cut to ERROR_BYTES) and pg (progress JSON, only when at most
--      PROGRESS_BYTES): a JSON array [offset, value, offset, value, …] of the
--      events that have one (offset: 0 for the entry's first event).
-- Collecting is a few table stores per event (no string is built per event).
--
-- Length: the stored setting event_stream_length (configure; absent: 10,000;
-- 0: no event is written at all) counts events. Entry ids
-- are event numbers, so "keep the last N events" is XADD MINID ~ (last - N
-- + 1): the server drops whole stream nodes (100 entries by default) whose
-- ids are all below it, O(1) amortized; the stream keeps at least N events.
--
-- The setting comes from OPT (includes/fixed.lua: the settings, read once per
-- call, when the call's first event is recorded; K_SETTINGS is a fixed key,
-- so reading it after a write is safe, see below); the event counter (K_META's "ev") and K_EVENTS are
-- touched only in flush_events, after the script's writes: they are fixed
-- keys declared in KEYS, which the server checks before the script starts
-- (includes/fixed.lua), so they cannot be missing mid-script.
local EVENTS_PER_ENTRY = 500
local ERROR_BYTES = 200
local PROGRESS_BYTES = 200

local TEXT_COLUMNS = {e = true, pg = true}

-- per call (on_call, includes/fixed.lua)
local EVENTS_LENGTH        -- OPT.event_stream_length (default: settings.DEFAULT_EVENT_STREAM_LENGTH)
local event_count
local event_kinds, event_ids, event_lanes
local event_columns        -- field -> {[event index] = value}, sparse
-- The columns are made once and kept from call to call (a table made per
-- call is garbage the server's Lua collector pays for: includes/fixed.lua):
-- only event_count says how many of their entries are this call's. The
-- sparse columns are made afresh only after a call that used one (a stale
-- value would be read as this call's), and all of them after a call of more
-- than EVENTS_KEPT events, so a large add_many's columns are not kept.
local EVENTS_KEPT = 1000
local event_columns_used
-- the columns for a call after one of ``count`` events
local function event_tables(count)
  if event_kinds and count <= EVENTS_KEPT then return event_kinds, event_ids, event_lanes end
  return {}, {}, {}
end
local function event_sparse_columns()
  if event_columns_used or not event_columns then return {}, false end
  return event_columns, false
end
on_call(function()
  EVENTS_LENGTH = nil  -- read at the call's first event (OPT reads the settings then)
  event_kinds, event_ids, event_lanes = event_tables(event_count or 0)
  event_columns, event_columns_used = event_sparse_columns()
  event_count = 0
end)

local function event_put(field, value)
  local column = event_columns[field]
  if not column then
    column = {}
    event_columns[field] = column
    event_columns_used = true
  end
  column[event_count] = value
end

-- Record one event of this call: ``lane`` nil or "" is the default lane, then
-- up to three field, value pairs (values as strings where the caller has them).
local function emit(kind, id, lane, k1, v1, k2, v2, k3, v3)
  if not EVENTS_LENGTH then EVENTS_LENGTH = OPT.event_stream_length end
  if EVENTS_LENGTH <= 0 then return end
  event_count = event_count + 1
  event_kinds[event_count], event_ids[event_count], event_lanes[event_count] = kind, id, lane or ""
  if k1 then event_put(k1, v1) end
  if k2 then event_put(k2, v2) end
  if k3 then event_put(k3, v3) end
end

-- The number of the last event written (the stream's last id), read from
-- the stream: only when the meta hash's counter "ev" is behind it (below).
local function stream_last_number()
  if redis.call("EXISTS", K_EVENTS) == 0 then return 0 end
  -- the last id ever given (XINFO: still right when the newest entries were
  -- trimmed or deleted by hand)
  local info = redis.call("XINFO", "STREAM", K_EVENTS)
  for i = 1, #info, 2 do
    if info[i] == "last-generated-id" then
      return tonumber(string.match(info[i + 1], "^(%d+)"))  -- exact below 2^53
    end
  end
  return 0
end

-- The fields of the entry holding events first..last (see the top of this file).
-- They are appended to ``fields`` (the XADD's arguments so far).
local function entry_fields(fields, first, last, stamp)
  local n = #fields
  fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = "t", stamp, "n", last - first + 1
  fields[n + 5], fields[n + 6] = "k", table.concat(event_kinds, " ", first, last)
  fields[n + 7], fields[n + 8] = "j", table.concat(event_ids, " ", first, last)
  fields[n + 9], fields[n + 10] = "g", table.concat(event_lanes, " ", first, last)
  if not event_columns_used then return fields end
  for field, column in pairs(event_columns) do
    local present = false
    if TEXT_COLUMNS[field] then
      local pairs_of = {}
      for i = first, last do
        if column[i] then
          pairs_of[#pairs_of + 1] = i - first
          pairs_of[#pairs_of + 1] = column[i]
        end
      end
      present = #pairs_of > 0
      if present then fields[#fields + 1], fields[#fields + 2] = field, cjson.encode(pairs_of) end
    else
      for i = first, last do
        if column[i] then present = true else column[i] = "" end
      end
      if present then
        fields[#fields + 1], fields[#fields + 2] = field, table.concat(column, " ", first, last)
      end
    end
  end
  return fields
end

-- XADD the entry holding events first..last as event ``number`` (the
-- last of them); the server's reply (an error as a value).
local function add_entry(number, first, last, stamp)
  local keep_from = number - EVENTS_LENGTH + 1
  local head
  if keep_from > 1 then
    head = {"XADD", K_EVENTS, "MINID", "~", fmt(keep_from), fmt(number) .. "-0"}
  else
    head = {"XADD", K_EVENTS, fmt(number) .. "-0"}
  end
  return redis.pcall(unpack(entry_fields(head, first, last, stamp)))
end

local function raise_if_error(reply)
  if type(reply) == "table" and reply.err then error(reply) end
  return reply
end

-- The first number of this call's events when the stream may be ahead of
-- ``number`` (the counter's): after the stream's last id; "ev" set to match.
local function numbers_after_stream(number)
  number = math.max(number, stream_last_number())
  META.put("ev", number + event_count)
  return number
end

-- Write this call's events (every script that emits calls it before it returns).
--
-- Numbering: the meta hash's field "ev" is the number of the last event
-- given; one HINCRBY takes this call's numbers, so no call reads the stream
-- (a call that read "ev" with META.read writes it with its other counters).
-- "ev" only grows, whatever happens to the stream: a stream trimmed or
-- deleted by hand goes on at the next number, and a reader whose cursor is
-- before it is told how many it missed (readEvents.lua). A stream may be
-- ahead of "ev" only if "ev" is gone (the meta hash deleted by hand, or a
-- stream written before the counter existed): the call that finds it absent
-- reads the stream's last id and goes on after it. Should an XADD still be
-- refused because the stream is ahead (a writer that keeps no counter, an
-- older echomq, writing the same queue), the call goes on after the stream's
-- last id the same way, so entry ids always grow; only while such a writer
-- runs can a large batch's first numbers repeat numbers it gave (its entry
-- id is above the stream's last, its first events' are not).
local function flush_events()
  if event_count == 0 then return end
  local number = META.add("ev", event_count) - event_count
  if number == 0 then number = numbers_after_stream(number) end  -- "ev" was absent
  local stamp = fmt(now_ms())
  for first = 1, event_count, EVENTS_PER_ENTRY do
    local last = math.min(first + EVENTS_PER_ENTRY - 1, event_count)
    local reply = add_entry(number + last, first, last, stamp)
    if first == 1 and type(reply) == "table" and reply.err
      and string.find(reply.err, "equal or smaller", 1, true) then
      number = numbers_after_stream(number)
      reply = add_entry(number + last, first, last, stamp)
    end
    raise_if_error(reply)
  end
  event_kinds, event_ids, event_lanes = event_tables(event_count)
  event_columns, event_columns_used = event_sparse_columns()
  event_count = 0
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

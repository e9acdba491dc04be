-- The queue's event stream (K_EVENTS, docs/lifecycle.md "Events"): every
-- transition script appends one entry per job it moves, in the same script,
-- so a reader sees exactly the transitions that happened, in their order.
--
-- An entry's fields: k (kind), j (job id), t (server time, ms), g (lane; left
-- out for the default lane), then what the kind needs: a (attempt),
-- e (error, cut to ERROR_BYTES), rs (result size, bytes), nx (next run time,
-- ms), st (stalls), pg (progress JSON, only when at most PROGRESS_BYTES).
--
-- Length: the stored setting event_stream_length (K_SETTINGS; absent: the
-- default below; 0: no event is written at all), read once per call when this
-- include runs, before the script's first write. Trimming is approximate
-- (XADD MAXLEN ~): the server drops whole stream nodes, so the stream holds
-- at least N entries and at most N plus one node (stream-node-max-entries,
-- 100 by default), at O(1) amortized cost per entry.
local EVENTS_DEFAULT_LENGTH = 10000
local ERROR_BYTES = 200
local PROGRESS_BYTES = 200

local EVENTS_LENGTH = tonumber(redis.call("HGET", K_SETTINGS, "event_stream_length") or "")
  or EVENTS_DEFAULT_LENGTH
local event_time = nil   -- the call's server time, read once at its first event

-- Append one event. ``lane`` nil or "" is the default lane; ``extra`` a flat
-- list of further field, value pairs (nil: none).
local function emit(kind, id, lane, extra)
  if EVENTS_LENGTH <= 0 then return end
  if not event_time then event_time = fmt(now_ms()) end
  local args = {"XADD", K_EVENTS, "MAXLEN", "~", EVENTS_LENGTH, "*",
    "k", kind, "j", id, "t", event_time}
  if lane and lane ~= "" then
    args[#args + 1], args[#args + 2] = "g", lane
  end
  if extra then
    for i = 1, #extra do args[#args + 1] = extra[i] end
  end
  redis.call(unpack(args))
end

-- An error message as events carry it: at most ERROR_BYTES bytes.
local function event_error(err)
  if not err then return "" end
  if #err > ERROR_BYTES then return string.sub(err, 1, ERROR_BYTES) end
  return err
end

-- The server clock is the only clock: milliseconds since the epoch from TIME,
-- read once per call (every now_ms() of one call is the same instant: the
-- call is atomic, and its event stamps and job times agree).
local call_now          -- per call (nil: not read yet)
on_call(function() call_now = nil end)
local function now_ms()
  if not call_now then
    local t = redis.call("TIME")
    call_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return call_now
end

-- Run a variadic command over a long argument list in slices (unpack has a
-- C-stack limit): call_chunked("ZADD", key, {s1, m1, s2, m2, ...}, 2).
local CHUNK = 2000
local function call_chunked(cmd, key, args, stride)
  local step = CHUNK * stride
  for i = 1, #args, step do
    redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
  end
end

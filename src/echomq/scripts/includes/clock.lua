-- The server clock is the only clock: milliseconds since the epoch from TIME.
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers up to 2^53 as exact decimal strings (tostring would round them).
local function fmt(n)
  return string.format("%.0f", n)
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

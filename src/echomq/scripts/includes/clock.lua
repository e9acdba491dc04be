-- The server clock is the only clock: milliseconds since the epoch from TIME.
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers up to 2^53 as exact decimal strings (tostring would round them).
local function fmt(n)
  return string.format("%.0f", n)
end

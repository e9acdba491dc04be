-- The queue's retry backoff, computed on the server (fail.lua): the stored
-- setting (OPT.backoff, from configure) if any, else the calling client's
-- backoff option, sent with the call. Attempt k waits base * factor^(k-1)
-- ms, at most cap, spread by +/- jitter (echomq.options.Backoff, the same
-- formula). The jitter's random source is the server clock's microseconds,
-- scrambled: deterministic given the clock, so a script's effects are the
-- same wherever it is replicated (only its result, the fire time, is).
local function backoff_ms(attempts, client)
  local b = OPT.backoff or client
  local base, factor, cap, jitter = b[1], b[2], b[3], b[4]
  local raw = math.min(cap, base * factor ^ math.max(0, attempts - 1))
  local usec = tonumber(redis.call("TIME")[2])
  local u = ((usec * 2654435761) % 1000003) / 1000002   -- 0 … 1
  local spread = (2 * u - 1) * jitter
  return math.floor(math.max(0, raw * (1 + spread)) + 0.5)
end

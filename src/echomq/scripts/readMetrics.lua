-- readMetrics: the per-minute metrics of the last minutes (read-only;
-- includes/metrics.lua), oldest minute first.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     minutes: how many, ending with the present one (1 … 4320)
-- ARGV[8]     a job name ("" = every name)
--
-- Returns: {now ms, minute, name, counts, minute, name, counts, ...}.
-- @include fixed
-- @include keys
-- @include clock
-- @include metrics

local now = now_ms()
local last = math.floor(now / 60000)
local out = {fmt(now)}
for minute = last - tonumber(ARGV[7]) + 1, last do
  local key = Metrics.key(fmt(minute))
  if ARGV[8] ~= "" then
    local v = redis.call("HGET", key, "n:" .. ARGV[8])
    if v then
      out[#out + 1] = fmt(minute)
      out[#out + 1] = ARGV[8]
      out[#out + 1] = v
    end
  else
    local h = redis.call("HGETALL", key)
    for i = 1, #h, 2 do
      if string.sub(h[i], 1, 2) == "n:" then
        out[#out + 1] = fmt(minute)
        out[#out + 1] = string.sub(h[i], 3)
        out[#out + 1] = h[i + 1]
      end
    end
  end
end
return out

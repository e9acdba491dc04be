-- configure: store queue-wide settings (echomq/settings.py checked every
-- value before the call, so the whole change is written or none of it).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7…]    field, value pairs; an empty value removes the field (the
--             setting falls back to each client's own option)
--
-- Returns: the settings hash after the change, as field, value pairs.
-- @include fixed
-- @include keys

read_key("EXISTS", queue_rate_key())  -- read before write: a changed rate drops it
local set, unset = {}, {}
for i = 7, #ARGV, 2 do
  if ARGV[i + 1] == "" then
    unset[#unset + 1] = ARGV[i]
  else
    set[#set + 1] = ARGV[i]
    set[#set + 1] = ARGV[i + 1]
  end
end
if #unset > 0 then redis.call("HDEL", K_SETTINGS, unpack(unset)) end
if #set > 0 then redis.call("HSET", K_SETTINGS, unpack(set)) end
-- a changed queue-wide limit may let claims through that were turned away:
-- forget why they were and ring the doorbell (includes/controls.lua); a
-- changed rate starts a fresh record of claim times, as a lane's does
for i = 7, #ARGV, 2 do
  if ARGV[i] == "rate_max" then redis.call("DEL", queue_rate_key()) end
end
for i = 7, #ARGV, 2 do
  if ARGV[i] == "concurrency" or ARGV[i] == "rate_max" then
    redis.call("HDEL", K_LANECTL, "qc", "qr")
    redis.call("LPUSH", K_WAKE, "1")
    redis.call("LTRIM", K_WAKE, 0, 0)
    break
  end
end
-- the mark that tells every call to read the settings, with their new
-- version (includes/fixed.lua, features)
META.stamp_format()
if redis.call("HLEN", K_SETTINGS) > 0 then
  META.mark_settings()
else
  META.unmark("fs")
end
return redis.call("HGETALL", K_SETTINGS)

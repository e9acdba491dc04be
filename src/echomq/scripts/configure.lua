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
return redis.call("HGETALL", K_SETTINGS)

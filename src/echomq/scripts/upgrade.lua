-- upgrade: bring the queue's stored format up to this client's (FORMAT,
-- docs/design.md §9) and say which format it is stored in. Every queue
-- object sends it once, before its first call (the greeting,
-- echomq.sending.sender). A constant number of commands: it reads the fixed
-- keys' sizes and a few fields, never a whole key of unbounded size.
--
-- Format 3 -> 4: the feature word gains the letter t (tags: a job may hold
-- them) and, where s is set, the settings' version after it
-- (includes/fixed.lua); format 4 is format 3 with the letter kept exact, the
-- version, and payloads in pieces (includes/text.lua) for new jobs.
--
-- Format 1 or 2 -> 4 (nothing else moves: jobs, lanes and sets keep their layout):
-- * the feature word "f" (includes/fixed.lua): s if a setting is stored, c if
--   K_LANECTL holds a lane control, a parked lane or its bookkeeping (a hash
--   of more than SCAN_MAX fields is taken to), w if a weight is stored, a
--   if a client waits, and every job letter (k g d o b t): whether some job
--   holds such a field is not known. Format 2's mark fields (fs fl fg fw)
--   go; rq is written if the arrival counter is past 2^31 or a renumbering
--   runs;
-- * from format 1 only, the default lane's counts move into the meta hash:
--   its active count (K_LANECTL "a:" -> meta "a:") and its claims since it
--   joined the ring (K_SERVED "" -> meta "s:"; K_SERVED keeps listing the
--   lane, at 0); format 2 keeps them there already;
-- * the timed sets' bounds (td, tx) stay as they are (a format-1 queue has
--   none: the next claim measures them).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
--
-- Returns: the format the queue is stored in now, as a string: FORMAT after
--          an upgrade, a newer one as it is (the client refuses it), "" when
--          nothing of the queue is stored yet (its first add writes FORMAT).
-- @include fixed
-- @include keys

local SCAN_MAX = 1000
local CONTROL = {["c:"] = true, ["r:"] = true, ["p:"] = true, ["m:"] = true, ["t:"] = true,
  ["k:"] = true}

local v = redis.call("HGET", K_META, "v")
if v and tonumber(v) >= tonumber(FORMAT) then return v end
-- the settings' version after s, where s is set (includes/fixed.lua META.mark_settings)
local function with_version(word)
  if not string.find(word, "s", 1, true) then return word end
  local t = redis.call("TIME")
  return (string.gsub(word, "s%d*", "")) .. "s" .. t[1] .. string.format("%06d", tonumber(t[2]))
end
if v == "3" then
  -- format 3 -> 4: the word gains t (whether some job holds tags is not known)
  local word = redis.call("HGET", K_META, "f") or ""
  if not string.find(word, "t", 1, true) then word = word .. "t" end
  redis.call("HSET", K_META, "v", FORMAT, "f", with_version(word))
  return FORMAT
end
if redis.call("EXISTS", K_META, K_SETTINGS, K_LANECTL, K_WEIGHTS, K_WAITERS, K_SERVED) == 0 then
  return ""
end
local from = tonumber(v) or 1
local marks = {"v", FORMAT}
local word = "kgdobt"
if redis.call("HLEN", K_SETTINGS) > 0 then word = word .. "s" end
if redis.call("HLEN", K_WEIGHTS) > 0 then word = word .. "w" end
if redis.call("EXISTS", K_WAITERS) == 1 then word = word .. "a" end
local counter = tonumber(redis.call("GET", K_COUNTER) or "0")
if counter > 2147483648 or redis.call("HEXISTS", K_META, "rn") == 1 then
  marks[#marks + 1], marks[#marks + 2] = "rq", "1"
end
local active = from < 2 and redis.call("HGET", K_LANECTL, "a:") or nil
local controls = false
local size = redis.call("HLEN", K_LANECTL) - (redis.call("HEXISTS", K_LANECTL, "a:") == 1 and 1 or 0)
if size > SCAN_MAX then
  controls = true
elseif size > 0 then
  local all = redis.call("HGETALL", K_LANECTL)
  for i = 1, #all, 2 do
    local name = all[i]
    if CONTROL[string.sub(name, 1, 2)] or name == "np" or name == "vt" or name == "sw" then
      controls = true
      break
    end
  end
end
if controls then word = word .. "c" end
local served = from < 2 and redis.call("HGET", K_SERVED, "") or nil
-- write phase
marks[#marks + 1], marks[#marks + 2] = "f", with_version(word)
if active then
  marks[#marks + 1], marks[#marks + 2] = "a:", active
  redis.call("HDEL", K_LANECTL, "a:")
end
if served then
  marks[#marks + 1], marks[#marks + 2] = "s:", served
  redis.call("HSET", K_SERVED, "", 0)
end
redis.call("HSET", K_META, unpack(marks))
redis.call("HDEL", K_META, "fs", "fl", "fg", "fw")
return FORMAT

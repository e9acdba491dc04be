-- upgrade: bring the queue's stored format up to this client's (FORMAT,
-- docs/design.md §9) and say which format it is stored in. Every queue
-- object sends it once, before its first call (the greeting,
-- echomq.sending.sender). A constant number of commands: it reads the fixed
-- keys' sizes and a few fields, never a whole key of unbounded size.
--
-- Format 1 -> 2 (nothing else moves: jobs, lanes and sets keep their layout):
-- * the feature marks (includes/fixed.lua): fs if a setting is stored, fl if
--   K_LANECTL holds a lane control, a parked lane or its bookkeeping (a hash
--   of more than SCAN_MAX fields is taken to), fg if a weight is stored, fw
--   if a client waits; rq if the arrival counter is past 2^31 or a
--   renumbering runs;
-- * the default lane's counts move into the meta hash: its active count
--   (K_LANECTL "a:" -> meta "a:") and its claims since it joined the ring
--   (K_SERVED "" -> meta "s:"; K_SERVED keeps listing the lane, at 0);
-- * the timed sets' bounds (td, tx) stay unknown: the next claim measures them.
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
if redis.call("EXISTS", K_META, K_SETTINGS, K_LANECTL, K_WEIGHTS, K_WAITERS, K_SERVED) == 0 then
  return ""
end
local marks = {"v", FORMAT}
local function mark(name, value)
  marks[#marks + 1] = name
  marks[#marks + 1] = value or "1"
end
if redis.call("HLEN", K_SETTINGS) > 0 then mark("fs") end
if redis.call("HLEN", K_WEIGHTS) > 0 then mark("fg") end
if redis.call("EXISTS", K_WAITERS) == 1 then mark("fw") end
local counter = tonumber(redis.call("GET", K_COUNTER) or "0")
if counter > 2147483648 or redis.call("HEXISTS", K_META, "rn") == 1 then mark("rq") end
local active = redis.call("HGET", K_LANECTL, "a:")
local controls = false
local size = redis.call("HLEN", K_LANECTL) - (active and 1 or 0)
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
if controls then mark("fl") end
local served = redis.call("HGET", K_SERVED, "")
-- write phase
if active then
  mark("a:", active)
  redis.call("HDEL", K_LANECTL, "a:")
end
if served then
  mark("s:", served)
  redis.call("HSET", K_SERVED, "", 0)
end
redis.call("HSET", K_META, unpack(marks))
return FORMAT

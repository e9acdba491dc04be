-- pauseQueue: stop serving claims from the whole queue, or serve them again
-- (adds still succeed while it is paused).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     "1" pause, "0" resume
--
-- A change records an event ("paused" or "resumed"; no job, the default
-- lane); a resume rings the doorbell, so an idle worker (which waits on it
-- after a claim that a paused queue refused) claims at once instead of at its
-- wait's timeout. Pausing a paused queue or resuming a running one changes
-- nothing and records nothing.
--
-- Returns: 1 if the queue's state changed, 0 if it was so already
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lanes

local pause = ARGV[7] == "1"
-- read phase
local was_paused = redis.call("HGET", K_META, "paused") == "1"
if pause == was_paused then return 0 end
-- write phase
if pause then
  META.stamp_format()  -- (its meta hash may be written first here: includes/fixed.lua)
  redis.call("HSET", K_META, "paused", "1")
  emit("paused", "", "")
else
  redis.call("HDEL", K_META, "paused")
  emit("resumed", "", "")
  ring_doorbell()
end
flush_events()
return 1

-- dropPage: delete one page of the queue's keys (drop(); the demo drops its
-- private queue this way). Not atomic across pages: stop workers first.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     SCAN cursor ("0" to start)
--
-- Returns: the next cursor ("0" when the scan is complete).
-- Every key of the queue shares the prefix, hence one slot: the scan runs on
-- the node that holds it and finds nothing of any other queue.
--
-- Adds are refused while it runs: each page but the last marks the meta hash
-- (field dr, the page's server time; add.lua refuses for a minute after it),
-- and keeps the meta hash; the last page deletes it. An add racing a drop
-- would otherwise leave a job listed in a lane whose hash a page deleted.
-- A drop that stops half way refuses adds for that minute; drop again.
-- @include fixed
-- @include clock

local PAGE = 500
local found = redis.call("SCAN", ARGV[7], "MATCH", PREFIX .. "*", "COUNT", PAGE)
local keys = {}
for _, key in ipairs(found[2]) do
  if key ~= K_META then keys[#keys + 1] = key end
end
if #keys > 0 then
  -- read first (EXISTS), so a key that moved away stops the script before any write
  redis.call("EXISTS", unpack(keys))
end
if found[1] == "0" then
  redis.call("DEL", K_META)
else
  redis.call("HSET", K_META, "dr", fmt(now_ms()))
end
if #keys > 0 then redis.call("UNLINK", unpack(keys)) end
return found[1]

-- dropPage: delete one page of the queue's keys (the demo drops its private queue
-- this way). Not atomic across pages: stop producers and workers first.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     SCAN cursor ("0" to start)
--
-- Returns: the next cursor ("0" when the scan is complete).
-- Every key of the queue shares the prefix, hence one slot: the scan runs on
-- the node that holds it and finds nothing of any other queue.
-- @include fixed

local PAGE = 500
local found = redis.call("SCAN", ARGV[7], "MATCH", PREFIX .. "*", "COUNT", PAGE)
local keys = found[2]
if #keys > 0 then
  -- read first (EXISTS), so a key that moved away stops the script before any write
  redis.call("EXISTS", unpack(keys))
  redis.call("UNLINK", unpack(keys))
end
return found[1]

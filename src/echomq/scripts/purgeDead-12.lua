-- purgeDead: delete dead jobs for good (hash, idempotency key, dead-set entry).
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     limit: most jobs to delete when no ids are given (oldest first)
-- ARGV[8..]   ids to delete (optional; ids that are not dead are skipped)
--
-- Returns: the list of ids deleted.
-- @include fixed
-- @include keys
-- @include clock
-- @include retention

local ids = {}
for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then
  ids = redis.call("ZRANGE", K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
local purged = {}
for _, id in ipairs(ids) do
  if redis.call("ZREM", K_DEAD, id) == 1 then
    drop_job(id)
    purged[#purged + 1] = id
  end
end
return purged

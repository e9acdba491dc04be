-- purgeDead: delete dead jobs for good (hash, idempotency key, dead-set entry).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     limit: most jobs to delete when no ids are given (oldest first)
-- ARGV[8..]   ids to delete (optional; ids that are not dead are skipped)
--
-- Returns: the list of ids deleted.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include tags
-- @include dedupe
-- @include logs
-- @include retention

local ids = {}
for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then
  ids = redis.call("ZRANGE", K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
-- read phase: which ids are dead, and their idempotency keys
local victims, idems, lanes, seen = {}, {}, {}, {}
for _, id in ipairs(ids) do
  if not seen[id] and redis.call("ZSCORE", K_DEAD, id) then
    seen[id] = true
    victims[#victims + 1] = id
    idems[#victims], lanes[#victims] = read_idem(id)
  end
end
-- write phase
if #victims > 0 then call_chunked("ZREM", K_DEAD, victims, 1) end
for i, id in ipairs(victims) do
  drop_job(id, idems[i])
  emit("removed", id, lanes[i])
end
flush_events()
return victims

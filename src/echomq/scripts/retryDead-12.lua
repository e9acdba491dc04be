-- retryDead: move dead jobs back to waiting with fresh attempts.
--
-- KEYS: the twelve fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     limit: most jobs to move when no ids are given (oldest first)
-- ARGV[8..]   ids to move (optional; ids that are not dead are skipped)
--
-- Returns: the list of ids moved.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes

local ids = {}
for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then
  ids = redis.call("ZRANGE", K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
local order = ordering()
local moved = {}
for _, id in ipairs(ids) do
  if redis.call("ZREM", K_DEAD, id) == 1 then
    local jk = job_key(id)
    local f = redis.call("HMGET", jk, "p", "g", "k")
    local score = fmt(arrival_score(order, tonumber(f[1])))
    redis.call("HSET", jk, "s", "waiting", "sc", score, "a", 0, "st", 0)
    redis.call("HDEL", jk, "f", "at")
    if f[3] then redis.call("PERSIST", idem_key(f[3])) end
    enter_lane(f[2], id, score)
    moved[#moved + 1] = id
  end
end
flush_waiting()
return moved

-- retryDead: move dead jobs back to waiting with fresh attempts.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     limit: most jobs to move when no ids are given (oldest first)
-- ARGV[8..]   ids to move (optional; ids that are not dead are skipped)
--
-- Returns: the list of ids moved.
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include lanes

local ids = {}
for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then
  ids = redis.call("ZRANGE", K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
local order = ordering()
-- read phase: which ids are dead, their hashes, idempotency keys and lanes
local moved, fields, seen, lanes = {}, {}, {}, {}
for _, id in ipairs(ids) do
  if not seen[id] and redis.call("ZSCORE", K_DEAD, id) then
    seen[id] = true
    local f = read_key("HMGET", job_key(id), "p", "g", "k")
    if not f[1] then missing_job(id) end
    if f[3] then read_key("EXISTS", idem_key(f[3])) end
    read_lane(lanes, f[2])
    moved[#moved + 1] = id
    fields[#fields + 1] = f
  end
end
-- write phase
if #moved == 0 then return moved end
call_chunked("ZREM", K_DEAD, moved, 1)
if order ~= "mint" and #moved > 1 then reserve_arrivals(#moved) end
for i, id in ipairs(moved) do
  local jk, f = job_key(id), fields[i]
  local score = fmt(arrival_score(order, tonumber(f[1])))
  redis.call("HSET", jk, "s", "waiting", "sc", score, "a", 0, "st", 0)
  redis.call("HDEL", jk, "f", "at")
  if f[3] then redis.call("PERSIST", idem_key(f[3])) end
  enter_lane(f[2], id, score)
  emit("requeued", id, f[2])
end
flush_waiting()
flush_events()
return moved

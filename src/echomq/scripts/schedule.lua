-- schedule: create or replace a schedule's definition (a compare-and-set on its
-- revision, read by the client with listSchedules in the same call of
-- Queue.schedule).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     ordering the client opened the queue with: "composite" | "mint" | "aged"
-- ARGV[8]     schedule id
-- ARGV[9]     the definition (JSON, includes/schedules.lua) with revision r
-- ARGV[10]    the revision the client read (0 = none): refused if it changed
-- ARGV[11]    next fire time (ms), computed from the server time the client read
-- ARGV[12]    "1": the timing is unchanged, keep the stored next fire time
-- ARGV[13]    the most schedules the queue may hold
--
-- Returns: the next fire time stored (ms, -1 while the schedule is paused),
--          E_ORDERING (-3) if the queue exists with the other ordering,
--          E_SCHEDULE_CHANGED (-10) if the revision changed since the client read it,
--          E_SCHEDULE_LIMIT (-11) if the queue holds the most schedules already.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include schedules

local stored = redis.call("HGET", K_META, "o")
if stored and stored ~= ARGV[7] then return E_ORDERING end
local id = ARGV[8]
local old = redis.call("HGET", K_SCHEDULES, id)
if fmt(schedule_revision(old)) ~= ARGV[10] then return E_SCHEDULE_CHANGED end
if not old and redis.call("HLEN", K_SCHEDULES) >= tonumber(ARGV[13]) then return E_SCHEDULE_LIMIT end
local paused = fire_state(id).pa
local current = redis.call("ZSCORE", K_FIRES, id)

if not stored then
  redis.call("HSET", K_META, "o", ARGV[7])
  META.stamp_new()
end
redis.call("HSET", K_SCHEDULES, id, ARGV[9])
if paused then
  redis.call("ZREM", K_FIRES, id)
  return -1
end
if ARGV[12] == "1" and current then return fmt(tonumber(current)) end
ring_if_first_fire(ARGV[11])
redis.call("ZADD", K_FIRES, ARGV[11], id)
return ARGV[11]

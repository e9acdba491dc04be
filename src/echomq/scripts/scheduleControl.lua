-- scheduleControl: remove, pause or resume a schedule.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     "remove" | "pause" | "resume"
-- ARGV[8]     schedule id
-- ARGV[9]     resume: the revision the client read (the next fire time below
--             was computed from that definition)
-- ARGV[10]    resume: next fire time (ms), from the server time the client read
--
-- Returns: 1 if the schedule exists (and was removed, paused or resumed;
--          pausing a paused one or resuming a running one changes nothing),
--          0 if there is no such schedule, E_SCHEDULE_CHANGED (-10, resume) if its revision changed.
--          A paused schedule fires nothing; resumed, it fires next at the first
--          fire time after the resume (fires while paused are not caught up).
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes
-- @include schedules

local action, id = ARGV[7], ARGV[8]
local raw = redis.call("HGET", K_SCHEDULES, id)
if not raw then return 0 end
local state = fire_state(id)
local current = redis.call("ZSCORE", K_FIRES, id)

if action == "remove" then
  redis.call("HDEL", K_SCHEDULES, id)
  redis.call("HDEL", K_FIRED, id)
  redis.call("ZREM", K_FIRES, id)
elseif action == "pause" then
  if not state.pa then
    state.pa = 1
    redis.call("HSET", K_FIRED, id, cjson.encode(state))
    redis.call("ZREM", K_FIRES, id)
  end
elseif action == "resume" then
  if fmt(schedule_revision(raw)) ~= ARGV[9] then return E_SCHEDULE_CHANGED end
  if state.pa then
    state.pa = nil
    if next(state) then
      redis.call("HSET", K_FIRED, id, cjson.encode(state))
    else
      redis.call("HDEL", K_FIRED, id)
    end
  end
  if not current then
    ring_if_first_fire(ARGV[10])
    redis.call("ZADD", K_FIRES, ARGV[10], id)
  end
else
  return redis.error_reply("scheduleControl: unknown action " .. action)
end
return 1

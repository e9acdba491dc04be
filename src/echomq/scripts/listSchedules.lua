-- listSchedules: the server time, and one schedule or all of them (at most
-- ARGV[9], and a queue holds at most schedules.MAX_SCHEDULES) in id order.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     a schedule id, or "" for every schedule
-- ARGV[8]     "1": with each last fire's job state (a read per schedule)
-- ARGV[9]     the most schedules to list
--
-- Returns: {now_ms, {{id, definition JSON, next fire ms or "", last fire JSON
--          or "", the last fire's job state or ""}, ...}}
-- @include fixed
-- @include keys
-- @include clock
-- @include schedules

local now = now_ms()
local ids = {}
if ARGV[7] ~= "" then
  if redis.call("HEXISTS", K_SCHEDULES, ARGV[7]) == 1 then ids[1] = ARGV[7] end
else
  ids = redis.call("HKEYS", K_SCHEDULES)
  table.sort(ids)
end
local limit = tonumber(ARGV[9])
local rows = {}
for i, id in ipairs(ids) do
  if i > limit then break end
  local state_raw = redis.call("HGET", K_FIRED, id) or ""
  local job_state = ""
  if ARGV[8] == "1" and state_raw ~= "" then
    local job = cjson.decode(state_raw).j
    if job then job_state = read_key("HGET", job_key(job), "s") or "" end
  end
  local nxt = redis.call("ZSCORE", K_FIRES, id)
  rows[#rows + 1] = {id, redis.call("HGET", K_SCHEDULES, id), nxt and fmt(tonumber(nxt)) or "",
    state_raw, job_state}
end
return {fmt(now), rows}

-- oldestWaiting: per lane, how long its longest-waiting job has been due
-- (read-only; /metrics' echomq_oldest_waiting_seconds, what autoscalers read).
-- A lane is sorted by tier, then arrival (composite) or id (mint): the first
-- job of each tier is that tier's longest waiting, so the lane's is the
-- earliest due of its tiers' first jobs (at most MAX_TIERS tiers looked at,
-- lowest first). Due: the job's run_at (a promoted delayed or retried job),
-- else its creation.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7..]   lane names ("" = the default lane), at most 1,000
--
-- Returns: {now ms, due ms or "" (no waiting job) per lane, in ARGV order}.
-- @include fixed
-- @include keys
-- @include clock

local MAX_TIERS = 16
local TIER = 4294967296  -- 2^32: a tier's width in a lane score
local now = now_ms()
local out = {fmt(now)}
for i = 7, #ARGV do
  local lk = lane_key(ARGV[i])
  local oldest = nil
  local head = redis.call("ZRANGE", lk, 0, 0, "WITHSCORES")
  local tiers = 0
  while head[1] and tiers < MAX_TIERS do
    tiers = tiers + 1
    local f = redis.call("HMGET", job_key(head[1]), "c", "at")
    local due = tonumber(f[2]) or tonumber(f[1])
    if due and (not oldest or due < oldest) then oldest = due end
    local next_tier = (math.floor(tonumber(head[2]) / TIER) + 1) * TIER
    head = redis.call("ZRANGEBYSCORE", lk, string.format("%.0f", next_tier), "+inf",
      "WITHSCORES", "LIMIT", 0, 1)
  end
  out[#out + 1] = oldest and fmt(oldest) or ""
end
return out

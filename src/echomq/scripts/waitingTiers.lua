-- waitingTiers: how many waiting jobs each lane holds in each tier (read-only).
-- A lane's scores are tier * 2^32 + counter (or tier * 2^32 in mint order), so
-- one tier is one score range (not in aged order: no tier is reported then); the walk jumps from tier to tier with one
-- ZRANGEBYSCORE and one ZCOUNT each, never reading the jobs themselves.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     most lanes to walk (ring order)
-- ARGV[8]     most tiers to report per lane (lowest tiers first)
--
-- Returns: {lane1, {tier, count, tier, count, ...}, more1, lane2, ...} where
--          more is 1 when the lane holds tiers beyond the reported ones.
-- @include fixed
-- @include keys
-- @include clock
-- @include lanes

local max_lanes, max_tiers = tonumber(ARGV[7]), tonumber(ARGV[8])

local function walk(lk)
  local out, low = {}, 0
  for _ = 1, max_tiers do
    local first = redis.call("ZRANGEBYSCORE", lk, fmt(low), "+inf", "WITHSCORES", "LIMIT", 0, 1)
    if #first == 0 then return out, 0 end
    local tier = math.floor(tonumber(first[2]) / TIER_UNIT)
    local next_low = (tier + 1) * TIER_UNIT
    out[#out + 1] = tier
    out[#out + 1] = redis.call("ZCOUNT", lk, fmt(tier * TIER_UNIT), "(" .. fmt(next_low))
    low = next_low
  end
  local rest = redis.call("ZCOUNT", lk, fmt(low), "+inf")
  return out, rest > 0 and 1 or 0
end

-- an aged key (due time + tier x age_step) holds no tier range: no tier is
-- reported, and ``more`` says the lane holds jobs (docs/ordering.md)
local aged = ordering() == "aged"
local reply = {}
for _, lane in ipairs(redis.call("LRANGE", K_RING, 0, max_lanes - 1)) do
  local tiers, more = {}, 1
  if not aged then tiers, more = walk(lane_key(lane)) end
  reply[#reply + 1] = lane
  reply[#reply + 1] = tiers
  reply[#reply + 1] = more
end
return reply

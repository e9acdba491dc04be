-- The data-dependent key names, built from the queue's tagged prefix exactly as
-- keys.QueueKeys builds them (tests/integration/test_keyspace.py checks it).
local function job_key(id) return PREFIX .. "job:" .. id end
local function lane_key(lane) return PREFIX .. "lane:" .. lane end
local function idem_key(key) return PREFIX .. "idem:" .. key end
local function rate_key(lane) return PREFIX .. "rate:" .. lane end
local function queue_rate_key() return PREFIX .. "qrate" end
local function dependents_key(id) return PREFIX .. "dependents:" .. id end

-- Reading the data-dependent keys (read before write, includes/fixed.lua).
-- During a key-by-key slot migration a key of the queue's slot may already
-- be on the target node: the server refuses the read ("non local key") on
-- the source, and on the target (importing, ASKING) a key not yet moved
-- reads as missing. Both end the script with a TRYAGAIN error before anything
-- is written; cluster clients and the worker retry TRYAGAIN.
local function try_again(why)
  error({err = "TRYAGAIN echomq: " .. why .. " (is the queue's slot being migrated?)"})
end

local function read_key(...)
  local reply = redis.pcall(...)
  if type(reply) == "table" and reply.err then
    if string.find(reply.err, "non local key", 1, true) then try_again(reply.err) end
    error(reply)
  end
  return reply
end

-- A job listed in one of the queue's sets whose hash is not here: never the
-- case on a stable slot (every script writes both together).
local function missing_job(id)
  try_again("job " .. id .. " is listed but its hash is not on this node")
end

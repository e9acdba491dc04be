-- The data-dependent key names, built from the queue's tagged prefix exactly as
-- keys.QueueKeys builds them (tests/integration/test_keyspace.py checks it).
local function job_key(id) return PREFIX .. "job:" .. id end
local function lane_key(lane) return PREFIX .. "lane:" .. lane end
local function idem_key(key) return PREFIX .. "idem:" .. key end

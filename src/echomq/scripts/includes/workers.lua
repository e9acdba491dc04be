-- The workers registry (echomq/registry.py, DESIGN §10 "Workers").
--
-- Each running worker keeps one hash per queue it serves, Workers.key(id)
-- (fields i: what it told, JSON; st: when it first beat; se: when it last
-- beat, both ms on the server clock), which expires ``ttl`` ms after its
-- last beat, and an entry in the sorted set Workers.index() scored by that
-- expiry. A worker beats every heartbeat interval with a ttl of three of
-- them, so a dead worker is gone within three heartbeats: its hash expires
-- on its own and listWorkers.lua skips expired entries; each beat removes
-- at most PRUNE expired entries, so the set holds the live workers and a
-- bounded tail. A worker that stops leaves at once (workerBeat.lua, no info).
local Workers = {}
Workers.PRUNE = 100
Workers.MAX_LISTED = 1000

function Workers.index() return PREFIX .. "workers" end
function Workers.key(id) return PREFIX .. "worker:" .. id end

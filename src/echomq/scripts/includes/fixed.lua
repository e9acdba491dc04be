-- The twelve fixed keys every script receives, in keys.QueueKeys.fixed() order,
-- and the option block every script receives first in ARGV.
--
-- KEYS[1]  meta       hash: o (ordering), v (stored format), paused, w (waiting count),
--                      added / completed / failed (running totals)
-- KEYS[2]  counter    string: arrival counter (composite ordering)
-- KEYS[3]  ring       list: lanes with waiting jobs, head first
-- KEYS[4]  turn       hash: lane, left (claims left in the head lane's turn)
-- KEYS[5]  weights    hash: lane -> weight (absent = 1)
-- KEYS[6]  served     hash: lane -> claims since the lane joined the ring
-- KEYS[7]  delayed    zset: id -> fire time (ms), delayed and retry-pending jobs
-- KEYS[8]  retrying   zset: id -> fire time (ms), the retry-pending subset
-- KEYS[9]  active     zset: id -> lease deadline (ms)
-- KEYS[10] completed  zset: id -> finish time (ms)
-- KEYS[11] dead       zset: id -> time of death (ms)
-- KEYS[12] wake       list: doorbell idle workers block on (at most one element)
--
-- ARGV[1]  prefix               "emq:{queue}:"
-- ARGV[2]  max_stalls           expired leases a job survives before it is dead
-- ARGV[3]  keep_completed_ms    retention age of completed jobs
-- ARGV[4]  keep_completed       retention count of completed jobs
-- ARGV[5]  keep_dead_ms         retention age of dead jobs
-- ARGV[6]  keep_dead            retention count of dead jobs
-- ARGV[7…] the script's own arguments
local K_META, K_COUNTER, K_RING, K_TURN = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_WEIGHTS, K_SERVED, K_DELAYED, K_RETRYING = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_ACTIVE, K_COMPLETED, K_DEAD, K_WAKE = KEYS[9], KEYS[10], KEYS[11], KEYS[12]

local PREFIX = ARGV[1]
local OPT = {
  max_stalls = tonumber(ARGV[2]),
  keep_completed_ms = tonumber(ARGV[3]),
  keep_completed = tonumber(ARGV[4]),
  keep_dead_ms = tonumber(ARGV[5]),
  keep_dead = tonumber(ARGV[6]),
}

-- return codes (errors.SCRIPT_ERRORS)
local E_NOT_FOUND, E_LEASE_LOST, E_ORDERING, E_CANCELLED = -1, -2, -3, -4

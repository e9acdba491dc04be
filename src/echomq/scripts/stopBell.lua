-- @keys 1
-- stopBell: end one worker's doorbell wait at once (a stopping worker rings its own
-- bell instead of cancelling a wait whose claim may already have run).
--
-- KEYS[1]  the worker's stop bell (list, keys.QueueKeys.stop_bell)
-- ARGV[1]  how long an element nobody popped is kept (ms)
--
-- Returns: 1
redis.call("LPUSH", KEYS[1], "1")
redis.call("PEXPIRE", KEYS[1], ARGV[1])
return 1

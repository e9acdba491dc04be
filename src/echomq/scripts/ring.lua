-- ring: wake one idle worker (a worker whose claim filled every free slot rings
-- for the next one).
--
-- KEYS: the fixed keys (includes/fixed.lua); only KEYS[12] (wake) is used
-- ARGV[1..6]  the option block (includes/fixed.lua)
--
-- Returns: 1
-- @include fixed
-- @include lanes

ring_doorbell()
return 1

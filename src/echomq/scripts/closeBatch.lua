-- closeBatch: seal a batch (no more children); whatever is due then fires in
-- this same step (a batch whose children all finished already: its callbacks).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the batch id
--
-- Returns: the batch's state after the call ("running", "succeeded", "failed",
--          "cancelled"; closing a closed batch changes nothing), or
--          E_NOT_FOUND (-1) for no such batch.
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include batch

local id = ARGV[7]
-- read phase: the batch and its callbacks' keys (Batch.read)
local b = Batch.read(id)
if not b then return E_NOT_FOUND end
if b.f.cl or b.f.k then return Batch.state(b) end
Batch.read_callbacks(b)  -- closing may make them due
-- write phase
local now = now_ms()
b.f.cl = "1"
redis.call("HSET", Batch.key(id), "cl", "1")
emit("batch_closed", id, nil)
Batch.settle(b, now)
flush_events()
return Batch.state(b)

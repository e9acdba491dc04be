-- peekBatch: one batch's counters and flags, without its callbacks' job specs
-- (read-only): batch_status's answer in bytes that do not grow with the
-- callbacks' data (the dashboard reads a batch on every refresh).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     the batch id
--
-- Returns: {id, field1, value1, ...} as Batch.summary gives it (includes/batch.lua),
--          or E_NOT_FOUND (-1) for no such batch.
-- (clock and events only because batch.lua records events elsewhere: this
-- script records none.)
-- @include fixed
-- @include keys
-- @include clock
-- @include events
-- @include paging
-- @include batch

return Batch.summary(ARGV[7]) or E_NOT_FOUND

-- createBatch: make a new, open batch (includes/batch.lua), listed in the
-- queue's index of batches; a few entries of batches gone leave that index
-- (Batch.read_sweep: bounded work).
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     ordering the client opened the queue with: "composite" | "mint"
-- ARGV[8]     the batch id (bat_…)
-- ARGV[9]     its callbacks, one JSON object: {"s"|"c"|"d": [id, name, data
--             (JSON text), tier, lane ("" = default), delay_ms, max_attempts
--             (-n = none given: the stored setting, else n)]} for on_success,
--             on_complete, on_death (checked by the client: echomq/batches.py)
--
-- Returns: the creation time (ms), E_ORDERING (-3) if the queue exists with
--          the other ordering, {E_INVALID_STATE (-6), "taken"} if the id is in
--          use (nothing is written then).
-- @include fixed
-- @include keys
-- @include text
-- @include clock
-- @include events
-- @include lanes
-- @include controls
-- @include paging
-- @include batch

local requested, id = ARGV[7], ARGV[8]
local callbacks = cjson.decode(ARGV[9])
-- read phase: the queue's ordering, the batch (a new id) and its callbacks'
-- ids, and the index entries this call sweeps
local meta = redis.call("HMGET", K_META, "o", "bs")
local stored = meta[1]
if stored and stored ~= requested then return E_ORDERING end
if Batch.read(id) then return {E_INVALID_STATE, "taken"} end
for _, spec in pairs(callbacks) do
  if read_key("EXISTS", job_key(spec[1])) == 1 then return {E_INVALID_STATE, "taken"} end
end
local sweep = Batch.read_sweep(meta[2] or nil, stored and true or false)
-- write phase
local now = now_ms()
if not stored then
  redis.call("HSET", K_META, "o", requested)
  META.stamp_new()
end
local fields = {"t", 0, "c", 0, "d", 0, "x", 0, "a", 0, "n", 0, "ca", fmt(now)}
for _, w in ipairs({"s", "c", "d"}) do
  if callbacks[w] then
    fields[#fields + 1] = "o" .. w
    fields[#fields + 1] = cjson.encode(callbacks[w])
  end
end
redis.call("HSET", Batch.key(id), unpack(fields))
Batch.apply_sweep(sweep, id, now)
emit("batch_created", id, nil)
flush_events()
return fmt(now)

-- extendMany: renew the leases of several jobs in one call (a worker's
-- heartbeat), each only from its holder, so heartbeat traffic is one command
-- per interval however many jobs a worker runs.
--
-- KEYS: the fixed keys (includes/fixed.lua)
-- ARGV[1..6]  the option block (includes/fixed.lua)
-- ARGV[7]     new lease length in ms, counted from now
-- ARGV[8..]   three values per job: id, lease token the caller holds, and
--             the job's log entry as JSON ("" = none: includes/logs.lua)
--
-- Returns: one value per job, in order: the new deadline (ms),
--          E_NOT_FOUND (-1), E_LEASE_LOST (-2), or E_CANCELLED (-4) when
--          cancel.lua took the job from this very lease.
-- @include fixed
-- @include keys
-- @include clock
-- @include logs
-- @include lease

local now = now_ms()
local deadline = fmt(now + tonumber(ARGV[7]))
-- read phase: every lease (and, for a lost one, whether cancel() took it)
local out = {}
local keys, ids, logged = {}, {}, {}
for i = 8, #ARGV, 3 do
  local id = ARGV[i]
  local jk, key_or_err, _, _, lg = check_lease(id, ARGV[i + 1], now)
  keys[#keys + 1] = jk or false
  ids[#ids + 1] = id
  -- a log entry: the log is read now (a job without one reads nothing more)
  logged[#logged + 1] = jk and ARGV[i + 2] ~= "" and {cjson.decode(ARGV[i + 2]), Logs.read(id, lg)}
  if jk then
    out[#out + 1] = deadline
  elseif key_or_err == E_LEASE_LOST and redis.call("HGET", job_key(id), "cx") == ARGV[i + 1] then
    out[#out + 1] = E_CANCELLED
  else
    out[#out + 1] = key_or_err
  end
end
-- write phase
local renewed = {}
for i, jk in ipairs(keys) do
  if jk then
    if logged[i] then
      redis.call("HSET", jk, "l", deadline, "lg", Logs.append(ids[i], logged[i][2], logged[i][1], now))
    else
      redis.call("HSET", jk, "l", deadline)
    end
    renewed[#renewed + 1] = deadline
    renewed[#renewed + 1] = ids[i]
  end
end
-- every renewed job passed check_lease, so it is in the active set already
if #renewed > 0 then
  call_chunked("ZADD", K_ACTIVE, renewed, 2)
  META.note("tx", renewed[1])  -- (one deadline for all: now + the same lease)
end
return out

-- Checking that the caller holds a job's lease. Returns the job key, the
-- job's idempotency key (or false), its lane (nil: the default lane), its
-- field dn (whether it has dependents), its field lg (its log, includes/logs.lua),
-- its fields n, c, at, ca (name, created, run at, claimed: what
-- includes/metrics.lua counts, as the whole fields table f[8..11], read
-- only when the queue counts metrics: OPT.metrics) and its
-- batch (field b, includes/batch.lua), or nil and an error code: E_NOT_FOUND if
-- the job is gone, E_LEASE_LOST if its lease belongs to another claim or has
-- expired by the server clock.
local function check_lease(id, token, now)
  local jk = job_key(id)
  -- (the metrics' fields only where they are counted: a field a job lacks
  -- costs the server a walk of the whole job hash)
  local f, batch
  if OPT.metrics then
    f = read_key("HMGET", jk, "s", "cl", "l", "k", "g", "dn", "lg", "n", "c", "at", "ca", "b")
    batch = f[12]
  else
    f = read_key("HMGET", jk, "s", "cl", "l", "k", "g", "dn", "lg", "b")
    batch = f[8]
  end
  if not f[1] then
    if redis.call("ZSCORE", K_ACTIVE, id) then missing_job(id) end
    return nil, E_NOT_FOUND
  end
  if f[1] ~= "active" or f[2] ~= token or tonumber(f[3]) <= now then
    return nil, E_LEASE_LOST
  end
  return jk, f[4], f[5], f[6], f[7], f, batch
end

-- A retry of a call whose reply was lost: the job was already finished by
-- this very lease (same token). Returns the job's fields {state, time} or nil.
local function finished_by(id, token, states)
  local f = read_key("HMGET", job_key(id), "s", "cl", "f", "at")
  if f[2] == token and states[f[1]] then return f end
  return nil
end

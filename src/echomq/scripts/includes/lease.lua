-- Checking that the caller holds a job's lease. Returns the job key, the
-- job's idempotency key (or false), its lane (false: the default lane), its
-- field dn (whether it has dependents), its field lg (its log, includes/logs.lua),
-- its fields n, c, at, ca (name, created, run at, claimed: what
-- includes/metrics.lua counts, as the whole fields table f[8..11], read
-- only when the queue counts metrics: OPT.metrics) and its
-- batch (field b, includes/batch.lua), or nil and an error code: E_NOT_FOUND if
-- the job is gone, E_LEASE_LOST if its lease belongs to another claim or has
-- expired by the server clock.
-- The fields check_lease reads, in the order it returns them (LEASE.READ
-- names each optional one's mark in the feature word, includes/fixed.lua):
-- a field a job may lack is read only when the queue may have written it
-- (a field a small hash lacks costs the server a walk of the whole hash).
local LEASE = {}
LEASE.READ = {{"s"}, {"cl"}, {"l"}, {"k", "fk"}, {"g", "fj"}, {"dn", "fd"}, {"lg", "fo"},
  {"n", "metrics"}, {"c", "metrics"}, {"at", "metrics"}, {"ca", "metrics"}, {"b", "fb"}}
-- the HMGET's fields and their places in the reply, by the feature word
-- ("*": a queue in an older format, every field), one table with metrics
-- counted and one without: a pure function of them, so kept from call to
-- call (LEASE.KEPT words at most)
LEASE.PLANS = {[true] = {}, [false] = {}, count = 0}
LEASE.KEPT = 64

function LEASE.plan()
  local word = META.value("v") == FORMAT and META.value("f") or "*"
  local metrics = OPT.metrics and true or false
  local kept = LEASE.PLANS[metrics]
  local plan = kept[word]
  if plan then return plan end
  plan = {fields = {}, at = {}}
  for i = 1, #LEASE.READ do
    local mark = LEASE.READ[i][2]
    local on = not mark or word == "*"
    if mark == "metrics" then
      on = metrics
    elseif mark and not on then
      on = string.find(word, META.LETTER[mark], 1, true) ~= nil
    end
    if on then
      plan.fields[#plan.fields + 1] = LEASE.READ[i][1]
      plan.at[#plan.at + 1] = i
    end
  end
  if LEASE.PLANS.count < LEASE.KEPT then
    kept[word] = plan
    LEASE.PLANS.count = LEASE.PLANS.count + 1
  end
  return plan
end

local function check_lease(id, token, now)
  local jk = job_key(id)
  local plan = LEASE.plan()
  local read = read_key("HMGET", jk, unpack(plan.fields))
  local f = {false, false, false, false, false, false, false, false, false, false, false, false}
  for i = 1, #plan.at do f[plan.at[i]] = read[i] end
  if not f[1] then
    if redis.call("ZSCORE", K_ACTIVE, id) then missing_job(id) end
    return nil, E_NOT_FOUND
  end
  if f[1] ~= "active" or f[2] ~= token or tonumber(f[3]) <= now then
    return nil, E_LEASE_LOST
  end
  return jk, f[4], f[5], f[6], f[7], f, f[12]
end

-- A retry of a call whose reply was lost: the job was already finished by
-- this very lease (same token). Returns the job's fields {state, time} or nil.
local function finished_by(id, token, states)
  local f = read_key("HMGET", job_key(id), "s", "cl", "f", "at")
  if f[2] == token and states[f[1]] then return f end
  return nil
end

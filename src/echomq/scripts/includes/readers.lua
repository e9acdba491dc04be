-- The readers of completed jobs: a completed job's dependents that may still
-- read its result (dependency_results), in the set readers_key(id).
local function readers_key(id) return PREFIX .. "readers:" .. id end

-- Completed jobs kept for their dependents (docs/lifecycle.md "Dependencies").
-- A dependent may read a completed dependency's result (dependency_results)
-- until it has finished, so pruning by retention keeps a completed job with
-- dependents (field dn) while any of them may still read it: while its
-- dependents set (dependents_key) is not empty (their release is still under
-- way), and while its readers set (readers_key: the dependents it released
-- or that were added after it completed) holds one that is not completed,
-- dead or gone. The readers are checked lazily, when the job comes up for
-- pruning: at most READERS.budget readers per call; the finished ones
-- are forgotten (SREM), so a fan-out of 10,000 is checked in bounded steps
-- over successive calls. A job held so is moved to the newest end of the
-- completed set (scored "now"; its finish time stays in its field f), so the
-- pruner goes on with the jobs behind it and never stalls behind held jobs;
-- it comes up again by age or count later. So the completed set may hold
-- more than keep_completed jobs by exactly the held ones, and a held job
-- outlives its last reader by up to the retention age.
-- READERS is the keeper read_prune takes for the completed set (only the
-- scripts that prune it or write readers include this file: claim.lua is
-- near Lua's limit of 200 locals per chunk).
local READERS = {budget = 100}  -- most readers checked per call

-- Whether the completed job ``id`` is still needed by a dependent (plans in
-- ``hold.forget`` the readers found finished, and in ``hold.drop`` the readers
-- set of a job it lets go). Reads only: the job's field dn first, so a job
-- without dependents costs one HMGET.
function READERS.read(id, hold)
  -- (with s, which every job has: a job without dn is found, not probed)
  local f = read_key("HMGET", job_key(id), "dn", "s", "tg", "lg")
  if f[3] then hold.tags[id] = f[3] end  -- its tags, should it go (includes/tags.lua)
  if f[4] then hold.logs[id] = f[4] end  -- its log, should it go (includes/logs.lua)
  if not f[1] then return false end
  if read_key("SCARD", dependents_key(id)) > 0 then return true end
  local rk = readers_key(id)
  local size = read_key("SCARD", rk)
  if size == 0 then
    hold.drop[#hold.drop + 1] = rk
    return false
  end
  if hold.left <= 0 then return true end
  local sample = read_key("SRANDMEMBER", rk, math.min(size, hold.left))
  hold.left = hold.left - #sample
  local finished, live = {}, false
  for _, reader in ipairs(sample) do
    local s = read_key("HGET", job_key(reader), "s")
    if not s or s == "completed" or s == "dead" then
      finished[#finished + 1] = reader
    else
      live = true
    end
  end
  if live or #finished < size then
    if #finished > 0 then hold.forget[#hold.forget + 1] = {rk, finished} end
    return true
  end
  hold.drop[#hold.drop + 1] = rk  -- every reader finished: the set goes with the job
  return false
end


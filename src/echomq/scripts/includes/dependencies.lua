-- Dependencies: a job added with depends_on is "blocked" (K_BLOCKED) with
-- field dp = how many of its dependencies have not completed yet and dd = the
-- dependency ids (JSON). Each pending dependency lists it in its dependents
-- set (dependents_key) and carries field dn (it has dependents). A completion releases the dependents: each one's dp
-- goes down by one, and at 0 it enters its lane as a new arrival. At most
-- RELEASE_BUDGET dependents are released per maintenance call, and per
-- completing call RELEASE_BUDGET plus one per job it completes (work the
-- caller sized: a fan-in completed in one batch is released at once); a
-- completed job with more dependents waits in K_RELEASING (the doorbell rings)
-- and maintenance goes on, a budget per call.
local RELEASE_BUDGET = 500

-- Plan the release of the dependents of ``parents`` (completed job ids), at
-- most ``budget`` in all; reads only (read before write). ``lanes`` is the
-- call's set of lanes read so far.
local function read_releases(parents, budget, lanes)
  local plan, left = {}, budget
  for _, parent in ipairs(parents) do
    local dk = dependents_key(parent)
    local size = read_key("SCARD", dk)
    local members, fields = {}, {}
    if size > 0 and left > 0 then
      members = read_key("SRANDMEMBER", dk, math.min(left, size))
      for i, id in ipairs(members) do
        fields[i] = read_key("HMGET", job_key(id), "s", "dp", "p", "g")
        read_lane(lanes, fields[i][4])
      end
      left = left - #members
    end
    plan[#plan + 1] = {parent = parent, members = members, fields = fields,
      rest = size - #members}
  end
  return plan
end

-- Carry out a plan of read_releases at server time ``now``; returns how many
-- jobs entered their lanes.
local function apply_releases(plan, now)
  local released = 0
  local order = nil
  for _, entry in ipairs(plan) do
    if #entry.members > 0 then
      call_chunked("SREM", dependents_key(entry.parent), entry.members, 1)
    end
    for i, id in ipairs(entry.members) do
      local f = entry.fields[i]
      if f[1] == "blocked" then
        local jk = job_key(id)
        if redis.call("HINCRBY", jk, "dp", -1) <= 0 then
          order = order or ordering()
          local score = fmt(arrival_score(order, tonumber(f[3]) or 0))
          redis.call("HSET", jk, "s", "waiting", "sc", score)
          redis.call("HDEL", jk, "dp")
          redis.call("ZREM", K_BLOCKED, id)
          enter_lane(f[4], id, score)
          released = released + 1
        end
      end
    end
    if entry.rest > 0 then
      -- an idle worker wakes, runs maintenance and goes on with the release
      if redis.call("ZADD", K_RELEASING, "NX", fmt(now), entry.parent) == 1 then ring_doorbell() end
    else
      redis.call("ZREM", K_RELEASING, entry.parent)
    end
  end
  return released
end

-- The completion of one or more jobs, written once: completeMany.lua runs it,
-- and completeClaim.lua runs it before its claim. Needs includes/lease.lua,
-- readers.lua and dependencies.lua (and what they need).
--
-- LEASE.complete(items): ``items`` the decoded list of {id, lease token,
-- result (JSON text), perhaps a log entry}; returns one value per item, as
-- completeMany.lua's header says. Its read phase reads every key it writes;
-- its write phase ends with the call's events written (flush_events).
function LEASE.complete(items)
  local now = now_ms()
  local stamp = fmt(now)
  -- the counters this call writes, written once at its end (META, includes/fixed.lua),
  -- and the completed set's pruning state (read_prune_completed)
  -- and the feature word (includes/fixed.lua), in the same HMGET
  META.read("completed", "ev", "last", "pc", "a:", unpack(META.FEATURES))
  -- read phase: every job, its idempotency key and the pruning, before any write
  -- (a table only some calls need is made when one does: nil until then; a
  -- table made per call is garbage the server's Lua collector pays for)
  local out = {}
  local done_ids, done_idem = {}, {}
  local first_of = #items > 1 and {} or nil  -- the same job twice in one call
  local freed = {}      -- lanes whose active slots this call gives back -> how many
  -- lane -> its active count, and lane -> whether it is parked (nil: none
  -- is), read once (includes/controls.lua)
  local active_of, parked_of = {}, nil
  -- the jobs with dependents (field dn), so a job without any reads no other key
  local parents = nil
  for i = 1, #items do
    local item = items[i]
    local id, token = item[1], item[2]
    if first_of and first_of[id] then
      out[i] = first_of[id]  -- the same job twice in one call: answered as the first
    else
      local jk, key_or_err, lane, has_dependents, lg, f, batch = check_lease(id, token, now)
      if jk then
        if batch then Batch.read(batch) end
        if has_dependents then
          parents = parents or {}
          parents[#parents + 1] = id
        end
        local record = key_or_err and read_key("GET", idem_key(key_or_err))  -- (its Dedupe record)
        lane = lane or ""
        if not freed[lane] then
          freed[#freed + 1] = lane
          local active, parked
          if META.lane_counts(lane) then
            -- its count in the meta hash; parked only if lane controls were ever set
            active = META.value("a:")
            parked = META.uses("fl") and redis.call("HGET", K_LANECTL, "k:") or nil
          else
            local ctl = redis.call("HMGET", K_LANECTL, "a:" .. lane, "k:" .. lane)
            active, parked = ctl[1], ctl[2]
          end
          active_of[lane] = tonumber(active) or 0
          if parked then
            parked_of = parked_of or {}
            parked_of[lane] = true
            plan_recheck(lane)  -- parked: it may go back into the ring
          end
        end
        freed[lane] = (freed[lane] or 0) + 1
        done_ids[#done_ids + 1] = id
        -- a log entry: the log is read now (a job without one reads nothing more)
        local logged = type(item[4]) == "table" and {item[4], Logs.read(id, lg)} or false
        -- {job key, idempotency key, result, lane, Dedupe record, log entry, batch id}
        done_idem[#done_idem + 1] = {jk, key_or_err, item[3], lane, record, logged, batch}
        -- the completed run in the minute's metrics (a queue with them on)
        if OPT.metrics then Metrics.ended(f[8], 1, f[9], f[10], f[11], now) end
        out[i] = now
      else
        -- a retried call whose first reply was lost: the same lease already completed it
        local done = key_or_err == E_LEASE_LOST and finished_by(id, token, {completed = true})
        out[i] = done and tonumber(done[3]) or key_or_err
      end
      if first_of then first_of[id] = out[i] end
    end
  end
  if #done_ids == 0 then return out end
  -- (a job has readers only where some job has dependents: the letter d)
  local victims = read_prune_completed(now, done_ids, META.uses("fd") and READERS or nil)
  local releases = parents and read_releases(parents, RELEASE_BUDGET + #parents, {})
  if OPT.metrics then Metrics.read_ended(now) end
  -- write phase
  local done_pairs = {}
  for i = 1, #done_ids do
    local id = done_ids[i]
    local jk, key, result = done_idem[i][1], done_idem[i][2], done_idem[i][3]
    local logged = done_idem[i][6]
    if logged then
      local lg = Logs.append(id, logged[2], logged[1], now)
      redis.call("HSET", jk, "s", "completed", "r", result, "f", stamp, "lg", lg)
    else
      redis.call("HSET", jk, "s", "completed", "r", result, "f", stamp)
    end
    if key then Dedupe.finish(key, id, now, OPT.keep_completed_ms, done_idem[i][5]) end
    emit("completed", id, done_idem[i][4], "rs", #result)
    if done_idem[i][7] then Batch.moved(done_idem[i][7], {a = -1, c = 1}, id, now) end
    done_pairs[#done_pairs + 1] = stamp
    done_pairs[#done_pairs + 1] = id
  end
  call_chunked("ZREM", K_ACTIVE, done_ids, 1)
  call_chunked("ZADD", K_COMPLETED, done_pairs, 2)
  META.add("completed", #done_ids)
  META.put("last", stamp) -- last activity (stats)
  apply_prune(K_COMPLETED, victims)
  if OPT.metrics then Metrics.write_ended() end
  if releases then apply_releases(releases, now) end
  flush_waiting()
  for i = 1, #freed do
    local lane = freed[i]
    give_back(lane, freed[lane], active_of[lane])
  end
  for i = 1, parked_of and #freed or 0 do
    local lane = freed[i]
    if parked_of[lane] then recheck(lane, now) end
  end
  flush_events()
  if any_waiters() then
    for i = 1, #done_ids do wake_waiters(done_ids[i], now) end
  end
  return out
end

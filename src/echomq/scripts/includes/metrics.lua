-- Metrics kept on the server (echomq/metrics.py, DESIGN §10 "Metrics kept on
-- the server"), for a queue with the stored setting metrics (configure(metrics=True)).
--
-- One hash per minute, Metrics.key(minute) (minute: ms // 60000 on the server
-- clock), expiring Metrics.KEEP_MS after it began: field "t" (the hash's
-- marker), and per job name a field "n:<name>" holding, space-separated,
-- completed, failed and dead (and cancelled, only when not 0: a minute
-- without a cancel stores the three counts an older echomq wrote and reads),
-- then "r<sum of run times, ms>" followed by
-- "<bucket>:<count>" for each bucket of the run histogram that is not empty
-- (buckets 1 … #Metrics.BUCKETS_MS + 1, the last past every bound), then
-- "w<sum>" and the wait histogram's buckets the same way: "3 0 0 r1250 4:3
-- w20 1:3". Sparse, so a minute's hash of up to 128 names stays a listpack
-- (values of at most 64 bytes, the server default) while few buckets are used. Run: from the claim to the
-- outcome; wait: from when the job was due (created, or its run_at / retry
-- time) to its claim. The completion scripts count every job they finish
-- (completeMany.lua: completed; fail.lua: failed or dead) in the call that
-- finishes it: one HMGET and one HSET of the minute's hash per call, however
-- many jobs and names (and, the first call of a minute, the PEXPIRE of the
-- new hash and the EXISTS that confirms it is new: includes/keys.lua).
--
-- Every other end of a job is counted by the script that makes it, in the
-- call's own batch (Metrics.ended: read once before the call's first write,
-- Metrics.read_ended, written once, Metrics.write_ended):
--   dead       a running job cancelled (cancel.lua, or its batch cancelled:
--              cancelBatch.lua), a job past its expiry met by a claim
--              (includes/rotation.lua), a job whose lease expired once more
--              than max_stalls allows (includes/time.lua reap: claim.lua,
--              maintain.lua), a blocked job whose dependency died or went
--              (includes/dependencies.lua kill_dependent)
--   failed     a running job cancelled with retry (cancel.lua): the attempt counts
--   cancelled  a job cancelled before it ran: waiting, delayed, retry pending
--              or blocked (cancel.lua, which removes it; cancelBatch.lua, and a
--              claim that meets a child of a cancelled batch, which end it
--              "cancelled")
-- A cancelled running job's run (claim to cancel) and wait go into the
-- histograms as a finished run's do; the other ends count no run (the job did
-- not run, or its run's end is not known: a stalled lease).
-- Not counted: remove, drop, purge_dead, pruning by retention, retry_dead,
-- release (nothing ends there, or it ended before and was counted then).
-- A queue without the setting runs none of it (DESIGN §9): the job fields
-- counted are read only where OPT.metrics is on, and only on paths that read
-- OPT already.
local Metrics = {}
Metrics.BUCKETS_MS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
  300000, 900000, 3600000}
Metrics.KEEP_MS = 72 * 3600 * 1000
Metrics.COUNTS = 4  -- completed, failed, dead, cancelled
Metrics.WIDTH = Metrics.COUNTS + 2 * (#Metrics.BUCKETS_MS + 2)  -- numbers per name and minute

function Metrics.key(minute) return PREFIX .. "metrics:" .. minute end

function Metrics.minute(now) return fmt(math.floor(now / 60000)) end

-- A call's counts, per job name (collected in the read phase, written once).
function Metrics.batch() return {names = {}, order = {}} end

function Metrics.bucket(ms)
  for i, le in ipairs(Metrics.BUCKETS_MS) do
    if ms <= le then return i end
  end
  return #Metrics.BUCKETS_MS + 1
end

-- Count one finished run of job ``name``: ``kind`` 1 completed, 2 failed, 3
-- dead, 4 cancelled; ``created``, ``run_at``, ``claimed``: its fields c, at
-- and ca (``claimed`` nil: no run is counted, only the end).
function Metrics.count(batch, name, kind, created, run_at, claimed, now)
  name = name or ""
  local e = batch.names[name]
  if not e then
    e = {}
    for i = 1, Metrics.WIDTH do e[i] = 0 end
    batch.names[name] = e
    batch.order[#batch.order + 1] = name
  end
  e[kind] = e[kind] + 1
  claimed = tonumber(claimed)
  if not claimed then return end
  local n, c = #Metrics.BUCKETS_MS + 2, Metrics.COUNTS  -- a histogram's buckets and its sum
  local run = math.max(0, now - claimed)
  e[c + Metrics.bucket(run)] = e[c + Metrics.bucket(run)] + 1
  e[c + n] = e[c + n] + run
  local due = math.max(tonumber(created) or claimed, tonumber(run_at) or 0)
  local wait = math.max(0, claimed - due)
  e[c + n + Metrics.bucket(wait)] = e[c + n + Metrics.bucket(wait)] + 1
  e[c + 2 * n] = e[c + 2 * n] + wait
end

-- The call's own batch of ends counted outside the completion scripts (nil
-- until its first), set per call.
local metrics_ended
on_call(function() metrics_ended = nil end)

-- Count one end of job ``name`` (Metrics.count's arguments) in the call's
-- batch, on a queue with metrics on; nothing otherwise. Read phase.
function Metrics.ended(name, kind, created, run_at, claimed, now)
  if not OPT.metrics then return end
  metrics_ended = metrics_ended or Metrics.batch()
  Metrics.count(metrics_ended, name, kind, created, run_at, claimed, now)
end

-- Read phase, last: the minute's hash for the call's batch (nothing: none).
function Metrics.read_ended(now)
  if metrics_ended then Metrics.read(metrics_ended, now) end
end

-- Write phase: the call's batch added to the minute's hash.
function Metrics.write_ended()
  if metrics_ended then Metrics.write(metrics_ended) end
end

-- Read phase: the minute's hash, as far as this call's names go.
function Metrics.read(batch, now)
  if #batch.order == 0 then return end
  local fields = {"t"}
  for _, name in ipairs(batch.order) do fields[#fields + 1] = "n:" .. name end
  batch.key = Metrics.key(Metrics.minute(now))
  batch.stored = read_key("HMGET", batch.key, unpack(fields))
end

-- Write phase: the minute's hash with this call's counts added.
function Metrics.write(batch)
  if #batch.order == 0 then return end
  local args = {"t", "1"}
  for i, name in ipairs(batch.order) do
    local e = batch.names[name]
    Metrics.merge(e, batch.stored[i + 1])
    args[#args + 1] = "n:" .. name
    args[#args + 1] = Metrics.format(e)
  end
  redis.call("HSET", batch.key, unpack(args))
  if not batch.stored[1] then redis.call("PEXPIRE", batch.key, Metrics.KEEP_MS) end
end

-- Add the stored text ``old`` (nil: none) into the dense array ``e``.
function Metrics.merge(e, old)
  if not old then return end
  local n, c = #Metrics.BUCKETS_MS + 2, Metrics.COUNTS  -- a histogram's buckets and its sum
  local at, count = 0, 0  -- at: where the current histogram starts in e (0: the counts)
  for token in string.gmatch(old, "%S+") do
    local head = string.sub(token, 1, 1)
    if head == "r" or head == "w" then
      at = head == "r" and c or c + n
      e[at + n] = e[at + n] + (tonumber(string.sub(token, 2)) or 0)
    elseif at == 0 then
      count = count + 1
      if count <= c then e[count] = e[count] + (tonumber(token) or 0) end
    else
      local b, v = string.match(token, "^(%d+):(%d+)$")
      b = tonumber(b)
      if b and b >= 1 and b < n then e[at + b] = e[at + b] + tonumber(v) end
    end
  end
end

-- The dense array ``e`` as the stored text.
function Metrics.format(e)
  local n, c = #Metrics.BUCKETS_MS + 2, Metrics.COUNTS
  local out = {fmt(e[1]), fmt(e[2]), fmt(e[3])}
  if e[4] > 0 then out[4] = fmt(e[4]) end  -- cancelled: only when some were
  for h, at in ipairs({c, c + n}) do
    out[#out + 1] = (h == 1 and "r" or "w") .. fmt(e[at + n])
    for b = 1, n - 1 do
      if e[at + b] > 0 then out[#out + 1] = b .. ":" .. fmt(e[at + b]) end
    end
  end
  return table.concat(out, " ")
end

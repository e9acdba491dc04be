-- Metrics kept on the server (echomq/metrics.py, DESIGN §10 "Metrics kept on
-- the server"), for a queue with the stored setting metrics (configure(metrics=True)).
--
-- One hash per minute, Metrics.key(minute) (minute: ms // 60000 on the server
-- clock), expiring Metrics.KEEP_MS after it began: field "t" (the hash's
-- marker), and per job name a field "n:<name>" holding, space-separated,
-- completed, failed, dead, then the run histogram (one count per bucket of
-- Metrics.BUCKETS_MS and one past the last), the run time's sum (ms), then
-- the wait histogram and sum the same way. Run: from the claim to the
-- outcome; wait: from when the job was due (created, or its run_at / retry
-- time) to its claim. The completion scripts count every job they finish
-- (completeMany.lua: completed; fail.lua: failed or dead) in the call that
-- finishes it: one HMGET and one HSET of the minute's hash per call, however
-- many jobs and names (and, the first call of a minute, the PEXPIRE of the
-- new hash and the EXISTS that confirms it is new: includes/keys.lua).
-- A queue without the setting runs none of it (DESIGN §9).
local Metrics = {}
Metrics.BUCKETS_MS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
  300000, 900000, 3600000}
Metrics.KEEP_MS = 72 * 3600 * 1000
Metrics.WIDTH = 3 + 2 * (#Metrics.BUCKETS_MS + 2)  -- numbers per name and minute

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
-- dead; ``created``, ``run_at``, ``claimed``: its fields c, at and ca.
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
  local n = #Metrics.BUCKETS_MS + 2  -- a histogram's buckets and its sum
  local run = math.max(0, now - claimed)
  e[3 + Metrics.bucket(run)] = e[3 + Metrics.bucket(run)] + 1
  e[3 + n] = e[3 + n] + run
  local due = math.max(tonumber(created) or claimed, tonumber(run_at) or 0)
  local wait = math.max(0, claimed - due)
  e[3 + n + Metrics.bucket(wait)] = e[3 + n + Metrics.bucket(wait)] + 1
  e[3 + 2 * n] = e[3 + 2 * n] + wait
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
    local old = batch.stored[i + 1]
    if old then
      local j = 0
      for v in string.gmatch(old, "%d+") do
        j = j + 1
        if j <= Metrics.WIDTH then e[j] = e[j] + tonumber(v) end
      end
    end
    local text = {}
    for j = 1, Metrics.WIDTH do text[j] = fmt(e[j]) end
    args[#args + 1] = "n:" .. name
    args[#args + 1] = table.concat(text, " ")
  end
  redis.call("HSET", batch.key, unpack(args))
  if not batch.stored[1] then redis.call("PEXPIRE", batch.key, Metrics.KEEP_MS) end
end

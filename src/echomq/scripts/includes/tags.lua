-- Tags on jobs (echomq/tags.py, DESIGN §10 "Find any job").
--
-- A job's tags are its field tg (JSON object text, keys sorted). Each tag
-- has an index, Tags.key(k, v): a sorted set of the ids of the jobs that
-- carry it, scored by their creation time (ms, the field c). A job enters
-- its indexes when it is added and leaves them when its hash is deleted
-- (pruning, remove, purge, cancel: includes/retention.lua), so an index
-- lists exactly the jobs that exist, and a queue whose jobs carry no tags
-- has no index and runs no command for them (DESIGN §9). A job whose hash
-- vanished another way (drop(), a key deleted by hand) may leave an entry
-- behind: findJobs.lua skips it.
local Tags = {}

function Tags.key(k, v) return PREFIX .. "tag:" .. k .. "=" .. v end

-- The index keys of a job whose field tg is ``tg`` (nil or "": none).
function Tags.keys(tg)
  local out = {}
  if not tg or tg == "" then return out end
  for k, v in pairs(cjson.decode(tg)) do out[#out + 1] = Tags.key(k, v) end
  table.sort(out)
  return out
end

-- Read phase of an add: read every index the job will enter.
function Tags.read(tg)
  for _, key in ipairs(Tags.keys(tg)) do read_key("EXISTS", key) end
end

-- Write phase: list the job in its indexes (``created`` its creation time).
function Tags.index(id, tg, created)
  for _, key in ipairs(Tags.keys(tg)) do redis.call("ZADD", key, created, id) end
end

-- Take the job out of its indexes (its hash is being deleted); an index
-- left empty goes with its last entry.
function Tags.unindex(id, tg)
  for _, key in ipairs(Tags.keys(tg)) do redis.call("ZREM", key, id) end
end

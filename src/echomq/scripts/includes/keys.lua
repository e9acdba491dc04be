-- The data-dependent key names, built from the queue's tagged prefix exactly as
-- keys.QueueKeys builds them (tests/integration/test_keyspace.py checks it).
local function job_key(id) return PREFIX .. "job:" .. id end
local function lane_key(lane) return PREFIX .. "lane:" .. lane end
local function idem_key(key) return PREFIX .. "idem:" .. key end
local function rate_key(lane) return PREFIX .. "rate:" .. lane end
local function queue_rate_key() return PREFIX .. "qrate" end
local function dependents_key(id) return PREFIX .. "dependents:" .. id end

-- Reading the data-dependent keys (read before write, includes/fixed.lua).
-- During a key-by-key slot migration a key of the queue's slot may be on the
-- other node:
-- * on the source (the slot MIGRATING) a key that has moved already is
--   refused ("non local key");
-- * on the target (the slot IMPORTING, the client sent ASKING) a key that has
--   not moved yet reads as missing, exactly like a key that exists nowhere.
--   Taken for absent, it would be written anew here while it still exists on
--   the source (a lane started again, an idempotency key reused, a job
--   dropped), and the later MIGRATE of it fails with BUSYKEY. So a read that
--   finds nothing asks the server once more with a second key of the slot
--   (confirm_missing): the server refuses a command of several keys on a
--   migrating or importing slot while one of them is missing, and accepts it
--   on a stable slot, which holds every key of the queue. One such check
--   per call is enough: the slot's state cannot change during a script.
-- Both end the script with a TRYAGAIN error before anything is written;
-- cluster clients and the worker retry TRYAGAIN. (So on the target, a call
-- that needs a key that exists nowhere, such as a new job's hash, waits
-- until the migration ends: docs/scaling.md.)
local function try_again(why)
  error({err = "TRYAGAIN echomq: " .. why .. " (is the queue's slot being migrated?)"})
end

local slot_stable  -- per call: the server accepted a missing key with another: the slot is stable
on_call(function() slot_stable = false end)

-- Whether this server is a cluster node: only there can a slot migrate, so
-- only there does a read that a migration needs, and nothing else, have to
-- run. Asked once (CLUSTER MYID, which a server without cluster support
-- refuses with an error saying so; any other error, NOPERM say, counts as a
-- cluster) and kept in META.cluster for as long as the server keeps the
-- library loaded: a server cannot turn cluster mode on or off while it runs.
-- (Sent by EVALSHA, on a server without functions, a script asks at most once
-- per call, where it would have read a key instead.)
function META.in_cluster()
  local known = META.cluster
  if known == nil then
    local reply = redis.pcall("CLUSTER", "MYID")
    known = not (type(reply) == "table" and reply.err
      and string.find(reply.err, "cluster support disabled", 1, true) ~= nil)
    META.cluster = known
  end
  return known
end

-- Nothing found: a reply of nil, 0, only nils, an empty list or an empty scan page.
local function finds_nothing(reply)
  if reply == false or reply == 0 then return true end
  if type(reply) ~= "table" then return false end
  if type(reply[2]) == "table" then return #reply[2] == 0 end  -- {cursor, items}
  for i = 1, #reply do
    if reply[i] then return false end
  end
  return true
end

local function confirm_missing(key)
  if slot_stable then return end
  if not META.in_cluster() then
    slot_stable = true
    return
  end
  local reply = redis.pcall("EXISTS", K_META, key)
  if type(reply) == "table" and reply.err then
    try_again(key .. " is not on this node yet: " .. reply.err)
  end
  -- both exist (a hash without the fields read): that says nothing of the slot
  if reply < 2 then slot_stable = true end
end

-- ``command`` is a read of one data-dependent key, the command's first key.
local function read_key(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == "table" and reply.err then
    if string.find(reply.err, "non local key", 1, true) then try_again(reply.err) end
    error(reply)
  end
  if finds_nothing(reply) then confirm_missing(key) end
  return reply
end

-- Whether the data-dependent ``key`` exists, as read_key("EXISTS", key) reads
-- it, in one command where that takes two: when the meta hash is known to
-- exist (``meta_exists``: the call read a field of it), EXISTS of both keys
-- answers for the key and, when it is missing, confirms the slot at once
-- (as confirm_missing does: 1 means the key is missing on a stable slot).
local function key_exists(key, meta_exists)
  if slot_stable or not meta_exists then return read_key("EXISTS", key) == 1 end
  local reply = redis.pcall("EXISTS", K_META, key)
  if type(reply) == "table" and reply.err then
    try_again(key .. " is not on this node yet: " .. reply.err)
  end
  if reply < 2 then slot_stable = true end
  return reply == 2
end

-- A job listed in one of the queue's sets whose hash is not here: during a
-- slot migration its hash is on the other node; on a stable slot the hash
-- is gone (a drop() raced an add: claim.lua and includes/time.lua drop such
-- entries and count them instead of calling this).
local function missing_job(id)
  error({err = "TRYAGAIN echomq: job " .. id .. " is listed but its hash is not on this"
    .. " node (is the queue's slot being migrated, or was the queue dropped while the"
    .. " job was added?)"})
end

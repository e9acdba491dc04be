-- The fixed keys every script receives, in keys.QueueKeys.fixed() order,
-- and the option block every script receives first in ARGV.
--
-- Conventions every script follows:
-- * Read before write. A script reads every key it will touch (the fixed
--   keys, and the data-dependent job, lane and idempotency keys built in
--   includes/keys.lua) before its first write: a read phase plans the whole
--   call, a write phase carries it out. During a key-by-key slot migration a
--   key that has already moved (on the source), or not arrived yet (on the
--   target: read_key in includes/keys.lua), stops the script with TRYAGAIN
--   while nothing is written yet, so the queue is as it was and the client
--   can try again. (The fixed keys are declared in KEYS: while any of them is
--   missing from a migrating slot the server answers TRYAGAIN before the
--   script runs.) tests/cluster/test_read_before_write.py checks every
--   writing script on both nodes.
-- * Bounded work. Work the caller did not ask for (promotion, reaping,
--   pruning, renumbering the arrival counter) is done at most a fixed budget
--   per call (TIMED_BUDGET and EXPIRED_BUDGET in includes/time.lua, PRUNE_BUDGET in
--   includes/retention.lua, RENUMBER_BUDGET in includes/renumber.lua),
--   earliest first; the next call goes on. Work the caller sized (claim(n),
--   add_many) is proportional to that size. No script does unbounded work.
--
-- KEYS[1]  meta       hash: o (ordering), v (stored format), paused, w (waiting count),
--                      added / completed / failed (running totals), last (last
--                      activity), ev (events given), pc (the completed set's
--                      pruning bounds: includes/retention.lua), bs (where
--                      the sweep of the batches' index goes on: includes/batch.lua);
--                      since format 2 also the feature marks (since format 3: the word f), the
--                      timed sets' bounds td tx, the default lane's counts
--                      a: s: (all below) and rq (includes/lanes.lua note_high_counter);
--                      counters are written once per call (META below)
-- KEYS[2]  counter    string: arrival counter (composite ordering)
-- KEYS[3]  ring       list: lanes with waiting jobs, head first
-- KEYS[4]  turn       hash: lane, left (claims left in the head lane's turn)
-- KEYS[5]  weights    hash: lane -> weight (absent = 1)
-- KEYS[6]  served     hash: lane -> claims since the lane joined the ring
-- KEYS[7]  delayed    zset: id -> fire time (ms), delayed and retry-pending jobs
-- KEYS[8]  retrying   zset: id -> fire time (ms), the retry-pending subset
-- KEYS[9]  active     zset: id -> lease deadline (ms)
-- KEYS[10] completed  zset: id -> finish time (ms)
-- KEYS[11] dead       zset: id -> time of death (ms)
-- KEYS[12] wake       list: doorbell idle workers block on (at most one element)
-- KEYS[13] settings   hash: the queue's stored settings (configure)
-- KEYS[14] events     stream: the queue's capped event log
-- KEYS[15] waiters    zset: id -> deadline (ms) of a client's wait() on that job
-- KEYS[16] renumber   zset: id -> arrival counter, the index of a renumbering
--                      in progress (includes/renumber.lua; absent otherwise)
-- KEYS[17] lanectl    hash: lane controls and counters (includes/controls.lua)
-- KEYS[18] lanewake   zset: parked lane -> ms its rate window / throttle ends
-- KEYS[19] gone       hash: lane that left the ring while lanes were parked ->
--                      the lane before it (includes/controls.lua)
-- KEYS[20] schedules  hash: schedule id -> definition (JSON, includes/schedules.lua)
-- KEYS[21] fires      zset: schedule id -> next fire time (ms); paused schedules absent
-- KEYS[22] fired      hash: schedule id -> last fire (JSON: fire time, job, skips, paused)
-- KEYS[23] blocked    zset: id -> time added (ms), jobs waiting for their dependencies
-- KEYS[24] releasing  zset: id -> completion time (ms), completed jobs whose
--                      dependents are still being released (includes/dependencies.lua)
-- KEYS[25] cancelled  zset: id -> time cancelled (ms), children of a cancelled
--                      batch that never ran (includes/batch.lua)
--
-- A script whose first line is "-- @keys N" takes N keys of its own instead
-- (echomq/scripts/__init__.py); adding a fixed key renames no script.
--
-- ARGV[1]  prefix               "emq:{queue}:"
-- ARGV[2..6] are the client's constructor options; a stored setting (K_SETTINGS)
-- wins over each of them (OPT below).
-- ARGV[2]  max_stalls           expired leases a job survives before it is dead
-- ARGV[3]  keep_completed_ms    retention age of completed jobs
-- ARGV[4]  keep_completed       retention count of completed jobs
-- ARGV[5]  keep_dead_ms         retention age of dead jobs
-- ARGV[6]  keep_dead            retention count of dead jobs
-- ARGV[7…] the script's own arguments
--
-- Per-call values and set-up. Under the function library (echomq.scripts.library)
-- the includes' top-level code runs once, when the library is loaded, and
-- every function then calls start_call(KEYS, ARGV) first; a script sent by
-- EVALSHA runs its includes and then start_call on every call. So the
-- includes define only functions and constants at their top level, and keep
-- per-call values in locals that start_call sets: the fixed keys, PREFIX and
-- OPT here, and each include's own per-call state (event buffers, lane
-- buffers, …) reset by a function it registers with on_call.
local K_META, K_COUNTER, K_RING, K_TURN
local K_WEIGHTS, K_SERVED, K_DELAYED, K_RETRYING
local K_ACTIVE, K_COMPLETED, K_DEAD, K_WAKE
local K_SETTINGS, K_EVENTS, K_WAITERS, K_RENUMBER
local K_LANECTL, K_LANEWAKE, K_GONE
local K_SCHEDULES, K_FIRES, K_FIRED
local K_BLOCKED, K_RELEASING, K_CANCELLED

local PREFIX
-- The stored-format version (echomq.storage.FORMAT; tests/unit/test_storage.py
-- checks the two agree). The first add writes it into the meta hash as "v".
local FORMAT = "4"
-- The options every script obeys: the queue's stored settings (K_SETTINGS,
-- written by configure.lua; echomq/settings.py names the fields), each
-- falling back to the calling client's option block, so every client of the
-- queue obeys the same stored values (docs/settings.md). Read when the call
-- first needs one (OPT_LAZY below): one HGETALL, none where none is stored.
-- max_attempts and backoff are nil when not stored: add.lua and fail.lua
-- then use what the client sent with the job.
local OPT

local call_resets = {}
-- Register ``reset``: start_call runs it at the start of every call, after
-- the fixed keys and OPT are set (an include's per-call state starts fresh).
local function on_call(reset)
  call_resets[#call_resets + 1] = reset
end

-- Lua's heap (KB) when this call started: end_call compares.
local call_heap_kb
-- A call whose work left more than SETTLE_KB of garbage on Lua's heap (one
-- that handled thousands of jobs: add_many, claim(n) with a large n) runs a
-- full collection before it returns, so that it pays for its own garbage:
-- left to the collector's incremental steps, that garbage is freed during
-- the calls that follow, and one small call (a claim of 50) then paid
-- 10-20 ms for a claim(10000) before it (benchmarks/scale_latency.py).
-- The reply of the call itself is still in use then: what the collector
-- frees of it later is spread over the following calls' steps.
local SETTLE_KB = 1024

-- OPT is read when a call first needs one of its values: a queue
-- whose feature word says no setting is stored (no "fs" mark, features below)
-- reads no settings at all. start_call sets OPT to OPT_LAZY.proxy, an empty table made once whose
-- first read builds the call's OPT (OPT_LAZY.load, defined once META is,
-- below, from OPT_LAZY.argv, the call's ARGV) and puts it in OPT's place:
-- one table per call, built by one constructor (a table grown field by field
-- rehashes as it grows, work the server pays on every call).
local OPT_LAZY = {}
OPT_LAZY.__index = function(_, name)
  OPT = OPT_LAZY.load()
  return OPT[name]
end

-- The first thing every call runs (the wrapper adds it: echomq/scripts/__init__.py).
local function start_call(KEYS, ARGV)
  call_heap_kb = collectgarbage("count")
  K_META, K_COUNTER, K_RING, K_TURN = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_WEIGHTS, K_SERVED, K_DELAYED, K_RETRYING = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  K_ACTIVE, K_COMPLETED, K_DEAD, K_WAKE = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
  K_SETTINGS, K_EVENTS, K_WAITERS, K_RENUMBER = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
  K_LANECTL, K_LANEWAKE, K_GONE = KEYS[17], KEYS[18], KEYS[19]
  K_SCHEDULES, K_FIRES, K_FIRED = KEYS[20], KEYS[21], KEYS[22]
  K_BLOCKED, K_RELEASING, K_CANCELLED = KEYS[23], KEYS[24], KEYS[25]
  PREFIX = ARGV[1]
  OPT_LAZY.argv = ARGV
  -- (made at the first call: FUNCTION LOAD's top level has no setmetatable)
  if not OPT_LAZY.proxy then OPT_LAZY.proxy = setmetatable({}, OPT_LAZY) end
  OPT = OPT_LAZY.proxy
  for i = 1, #call_resets do call_resets[i]() end
end

-- Integers up to 2^53 as exact decimal strings (tostring would round them):
-- an integer by C's integer printing ("%d"), several times cheaper than the
-- floating-point "%.0f", which is kept for anything else (a fraction rounds).
local function fmt(n)
  n = n + 0  -- a numeric string as its number, as "%.0f" takes it
  if n % 1 == 0 and n > -9007199254740992 and n < 9007199254740992 then
    return string.format("%d", n)
  end
  return string.format("%.0f", n)
end

-- The meta hash's counters and stamps (w, added, completed, ev, last, …),
-- written once per call. META.read(field, …) reads fields with one HMGET
-- (false: absent); from then on META.add and META.put of a field it read
-- only change the call's copy, and end_call writes every changed field with
-- one HSET: a call that moves one job writes its four counters with one
-- command, not four. A field not read in the call is written at once (HINCRBY,
-- HSET), as before. The script runs alone, so reading a field and writing
-- its new value later in the call is the same as HINCRBY, whoever else
-- (another client, an older version) writes the field between calls.
local META = {}
-- META.known (field -> value read, false: absent), META.changed (field -> true)
-- and META.fields (flush's HSET arguments) are tables made once, at FUNCTION
-- LOAD, and emptied for each call: a call allocates no table of its own for
-- them (a table built and resized per call is garbage the server's Lua
-- collector pays for after the call: benchmarks/RESULTS.md, call_cost).
-- META.names lists the fields read (so the next call empties the two by
-- index, without a generic loop).
META.known, META.changed, META.fields, META.names = {}, {}, {}, {}
META.dirty, META.clear_rq = false, false
on_call(function()
  if META.dirty then
    local known, changed, names = META.known, META.changed, META.names
    for i = 1, #names do
      local name = names[i]
      known[name], changed[name], names[i] = nil, nil, nil
    end
  end
  -- false, not nil: a field set to nil loses its slot in META at Lua's next
  -- collection, and setting it again then rehashes the whole table, once
  -- per call (~13k instructions with META's size at a power of two)
  META.dirty = false
  META.clear_rq = false  -- (includes/renumber.lua)
end)

function META.read(...)
  local values = redis.call("HMGET", K_META, ...)
  local known, names, list = META.known, {...}, META.names
  local n = #list
  for i = 1, #names do
    known[names[i]] = values[i]
    list[n + i] = names[i]
  end
  META.dirty = true
  return values
end

-- The field ``name`` as this call sees it: its copy when the call read it
-- (changes not written yet included), else the stored value (nil: absent).
function META.get(name)
  local value = META.known[name]
  if value == nil then return redis.call("HGET", K_META, name) or nil end
  return value or nil
end

-- Add ``delta`` to the integer field ``name``; returns its new value.
function META.add(name, delta)
  local value = META.known[name]
  if value == nil then return redis.call("HINCRBY", K_META, name, delta) end
  value = (tonumber(value) or 0) + delta
  META.put(name, value)
  return value
end

function META.put(name, value)
  if META.known[name] == nil then
    redis.call("HSET", K_META, name, value)
    return
  end
  META.known[name] = value
  META.changed[name] = true
end

-- The values of the meta fields ``...`` as META.read returns them (false:
-- absent): from the call's copy when it read them all already (a script that
-- names every field it needs in its first META.read pays one HMGET), else
-- read, all of them, with one HMGET. Before the call changed any of them.
-- One table either way: a table made per call is garbage the server's Lua
-- collector pays for, at a cost that grows with the library's heap.
function META.fetch(...)
  local known, values = META.known, {...}
  for i = 1, #values do
    local value = known[values[i]]
    if value == nil then return META.read(...) end
    values[i] = value
  end
  return values
end

-- The value of one meta field as this call sees it (nil: absent): no
-- command when the call read it already, else one HMGET.
function META.value(name)
  local value = META.known[name]
  if value == nil then value = META.read(name)[1] end
  return value or nil
end

-- Features (DESIGN §9: a feature costs only the queues that use it). A queue
-- stored in format 3 or later (meta "v") keeps in its meta hash the feature word "f":
-- one letter for each feature whose state exists (or may), and a call reads
-- a feature's keys, or a job's fields of it, only when its letter is there.
-- The word is read with the call's other meta fields (FEATURES: a script
-- names them in its first META.read), and it is present on every such
-- queue (META.stamp_new writes it with "v", "" on a plain queue), so a plain
-- queue pays one field found near the hash's front: a field a small hash
-- lacks costs a walk of the whole hash, one per mark when format 2 kept each
-- mark in a field of its own (benchmarks/RESULTS.md). The marks, by name
-- (META.LETTER gives each one's letter):
--   fs  s  the settings hash holds a setting (configure.lua)
--   fl  c  a lane control was set on some lane (setLane.lua, release.lua; kept)
--   fg  w  a lane weight is stored (setLane.lua; removed with the last weight)
--   fw  a  a client waits on a job (wait.lua, batchDone.lua; removed when
--          maintenance finds the waiters' set empty)
-- and, for the fields of jobs (kept once set: check_lease, includes/lease.lua,
-- reads a field only when the queue may have written it):
--   fk  k  a job was added with an idempotency key (its field k)
--   fj  g  a job was put in a lane other than the default one (field g)
--   fd  d  a job has dependents (field dn)
--   fo  o  a job has a log (field lg, includes/logs.lua)
--   fb  b  a job belongs to a batch (field b)
--   ft  t  a job was added with tags (field tg, includes/tags.lua; since
--          format 4: a completion that prunes reads no pruned job's fields
--          on a queue with neither t nor o)
-- A queue in an older format (written by an older echomq, or not written
-- yet) has no word: every feature counts as used, and its keys are read as
-- before; upgrade.lua writes the word (with every job letter: whether some
-- job holds such a field is not known).
META.FEATURES = {"v", "f"}
META.LETTER = {fs = "s", fl = "c", fg = "w", fw = "a", fk = "k", fj = "g", fd = "d", fo = "o",
  fb = "b", ft = "t"}

-- Whether the queue may use feature ``mark`` (a name of META.LETTER).
function META.uses(mark)
  if META.value("v") ~= FORMAT then return true end
  local word = META.value("f")
  return not word or string.find(word, META.LETTER[mark], 1, true) ~= nil
end

-- Mark feature ``mark`` used (write phase; nothing on a queue in an older format).
function META.mark(mark)
  if META.value("v") ~= FORMAT then return end
  local word, letter = META.value("f") or "", META.LETTER[mark]
  if not string.find(word, letter, 1, true) then META.put("f", word .. letter) end
end

-- Mark feature ``mark`` no longer used (write phase).
function META.unmark(mark)
  if META.value("v") ~= FORMAT then return end
  local word = META.value("f")
  if word then
    local left = string.gsub(word, META.LETTER[mark] .. "%d*", "")  -- (s: with its version)
    if left ~= word then META.put("f", left) end
  end
end

-- The settings' version (format 4): in the feature word the letter s is
-- followed by the digits of the server time, in microseconds, of the
-- configure that last changed the settings hash; nothing else writes the hash
-- (echomq/settings.py). A call takes the options it built from the hash the
-- last time it read the same queue's hash at that version, with the same
-- option block, instead of reading the hash again (OPT_LAZY.load): a queue
-- with a stored setting pays no command for it. A word whose s has no
-- digits (written before the version was) has its hash read on every call.
function META.settings_version()
  return string.match(META.value("f") or "", "s(%d+)")
end

-- Mark the settings changed: s with a new version (write phase; configure.lua).
function META.mark_settings()
  if META.value("v") ~= FORMAT then return end
  local t = redis.call("TIME")
  local word = string.gsub(META.value("f") or "", "s%d*", "")
  META.put("f", word .. "s" .. t[1] .. string.format("%06d", tonumber(t[2])))
end

-- Since format 2 the default lane's own counters are fields of the meta hash,
-- read and written with the call's other counters, so a plain queue's claim
-- and completion pay no command for them: "a:" its active jobs (K_LANECTL's
-- "a:L" for every other lane, includes/controls.lua) and "s:" its claims
-- since it joined the ring (K_SERVED's count for every other lane; K_SERVED
-- still lists the default lane while it is in the ring). A format-1 queue
-- keeps the default lane's in K_LANECTL and K_SERVED, as it always did.
function META.lane_counts(lane)
  return lane == "" and META.value("v") == FORMAT
end

-- A new queue's format and its feature word, none used yet unless a call
-- before its first job marked one (write phase: the call that writes the
-- queue's ordering, or its first mark).
function META.stamp_new()
  META.put("v", FORMAT)  -- (the call's copy too: the rest of it reads this format)
  if not META.value("f") then META.put("f", "") end
end

-- A queue whose meta hash holds neither "v" nor "o" has no job written yet:
-- a call that writes its first mark (configure, a lane control, a wait) makes
-- it format FORMAT there and then, so its marks are exact from the start (else
-- the first add, seeing no "v", would take it for an older format).
function META.stamp_format()
  if not META.value("v") and not META.value("o") then META.stamp_new() end
end

-- The call's OPT from the stored settings ``s`` (name -> value) and the
-- client's option block ``ARGV``: one table, built by one constructor.
OPT_LAZY.build = function(s, ARGV)
  return {
    max_stalls = tonumber(s.max_stalls or ARGV[2]),
    keep_completed_ms = tonumber(s.keep_completed_ms or ARGV[3]),
    keep_completed = tonumber(s.keep_completed or ARGV[4]),
    keep_dead_ms = tonumber(s.keep_dead_ms or ARGV[5]),
    keep_dead = tonumber(s.keep_dead or ARGV[6]),
    max_attempts = tonumber(s.max_attempts),
    backoff = s.backoff_base_ms and {tonumber(s.backoff_base_ms), tonumber(s.backoff_factor),
      tonumber(s.backoff_cap_ms), tonumber(s.backoff_jitter)},
    event_stream_length = tonumber(s.event_stream_length or 10000),  -- settings.DEFAULT_EVENT_STREAM_LENGTH
    -- queue-wide limits (includes/controls.lua "Queue-wide limits"): stored only
    concurrency = tonumber(s.concurrency),
    rate_max = tonumber(s.rate_max),
    rate_per = tonumber(s.rate_per_ms),
    -- the aged ordering's step per tier (docs/ordering.md), ms (settings.DEFAULT_AGE_STEP)
    age_step_ms = tonumber(s.age_step_ms or 60000),
    -- per-minute metrics (includes/metrics.lua): stored only
    metrics = s.metrics == "1",
  }
end

-- A queue with no stored setting takes every value from the client's option
-- block, which is the same on every call of one client: the OPT built from
-- the last such block is kept (OPT_LAZY.plain: the five strings and the
-- table; nothing writes into an OPT) and serves every call that sends the
-- same block, so a plain queue's call builds no table and parses no number
-- for its options (Lua's strings are interned: comparing two is one
-- pointer's compare). Under EVALSHA every call starts afresh and builds it.
OPT_LAZY.NONE = {}
OPT_LAZY.load = function()
  local ARGV = OPT_LAZY.argv
  if not META.uses("fs") then
    local kept = OPT_LAZY.plain
    if kept and kept[1] == ARGV[2] and kept[2] == ARGV[3] and kept[3] == ARGV[4]
        and kept[4] == ARGV[5] and kept[5] == ARGV[6] then
      return kept.opt
    end
    kept = {ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], opt = OPT_LAZY.build(OPT_LAZY.NONE, ARGV)}
    OPT_LAZY.plain = kept
    return kept.opt
  end
  -- the settings' version (META.settings_version): the OPT this queue's last
  -- call built at that version with the same option block, without a read
  local version = META.settings_version()
  local mine = version and OPT_LAZY.by_queue[PREFIX]
  if mine and mine.version == version and mine[1] == ARGV[2] and mine[2] == ARGV[3]
      and mine[3] == ARGV[4] and mine[4] == ARGV[5] and mine[5] == ARGV[6] then
    return mine.opt
  end
  -- the whole hash (a handful of fields, only the names settings.py allows):
  -- cheaper than an HMGET naming all fourteen. The OPT built from the last
  -- hash read is kept with that hash's reply and the option block: a call
  -- that reads the same hash (the same strings in the same order) and sends
  -- the same block takes it, as a plain queue's call does above.
  local stored = redis.call("HGETALL", K_SETTINGS)
  local opt = OPT_LAZY.from_stored(stored, ARGV)
  if version then  -- (at most OPT_LAZY.QUEUES queues' kept at once)
    if not mine and OPT_LAZY.queues >= OPT_LAZY.QUEUES then
      OPT_LAZY.by_queue, OPT_LAZY.queues = {}, 0
    end
    if not mine then OPT_LAZY.queues = OPT_LAZY.queues + 1 end
    OPT_LAZY.by_queue[PREFIX] = {ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], version = version,
      opt = opt}
  end
  return opt
end
OPT_LAZY.by_queue = {}
OPT_LAZY.queues = 0
OPT_LAZY.QUEUES = 256

-- The OPT of the settings hash's reply ``stored`` and the option block.
OPT_LAZY.from_stored = function(stored, ARGV)
  local kept = OPT_LAZY.stored
  if kept and #kept.raw == #stored and kept[1] == ARGV[2] and kept[2] == ARGV[3]
      and kept[3] == ARGV[4] and kept[4] == ARGV[5] and kept[5] == ARGV[6] then
    local same, raw = true, kept.raw
    for i = 1, #stored do
      if raw[i] ~= stored[i] then
        same = false
        break
      end
    end
    if same then return kept.opt end
  end
  local s = {}
  for i = 1, #stored, 2 do s[stored[i]] = stored[i + 1] end
  kept = {ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], raw = stored, opt = OPT_LAZY.build(s, ARGV)}
  OPT_LAZY.stored = kept
  return kept.opt
end

-- The timed sets' first scores as lower bounds in the meta hash (since format 2):
-- no delayed job fires before "td", no lease ends before "tx" (absent: not
-- known). A claim scans the delayed or the active set only once the clock
-- has reached its bound, and then writes the first score it found
-- (includes/time.lua); every write of a score into either set lowers the
-- bound (META.note: ring_if_earliest, includes/lanes.lua, runs it before
-- every job enters the delayed set; a lease runs it), and maintenance writes both
-- exactly. META.NO_TIME: the set is empty.
META.NO_TIME = 9007199254740991

-- Lower the bound ``mark`` ("td" or "tx") to ``at`` if it is above.
function META.note(mark, at)
  local bound = META.value(mark)
  if bound and tonumber(at) < tonumber(bound) then META.put(mark, fmt(at)) end
end

-- Write the changed fields (end_call does it: no script can forget).
function META.flush()
  if not META.dirty then return end
  local fields, n = META.fields, 0
  for name in pairs(META.changed) do
    local value = META.known[name]
    fields[n + 1] = name
    fields[n + 2] = type(value) == "number" and fmt(value) or value
    n = n + 2
    META.changed[name] = nil
  end
  if n > 0 then redis.call("HSET", K_META, unpack(fields, 1, n)) end
end

-- A script that makes two transitions in one call (completeClaim.lua: a
-- completion, then a claim) starts the second as a call of its own would:
-- the first's meta counters written, every include's per-call state reset,
-- so the second reads what the first wrote and keeps nothing of its buffers.
function META.next_transition()
  META.flush()
  for i = 1, #call_resets do call_resets[i]() end
end

-- The last thing every call runs, on its reply (the wrapper adds it).
local function end_call(reply)
  META.flush()
  if collectgarbage("count") - call_heap_kb > SETTLE_KB then collectgarbage("collect") end
  return reply
end

-- return codes (errors.SCRIPT_ERRORS)
local E_NOT_FOUND, E_LEASE_LOST, E_ORDERING, E_CANCELLED = -1, -2, -3, -4
local E_LANE_FULL, E_INVALID_STATE = -5, -6
-- a schedule's compare-and-set lost (it changed since the client read it: read
-- again), and the queue holds its most schedules already
local E_SCHEDULE_CHANGED, E_SCHEDULE_LIMIT = -10, -11

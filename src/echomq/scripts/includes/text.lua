-- Stored text: cut at UTF-8 character boundaries, for a preview (listJobs,
-- peekJob) and for a job's payload in pieces.
--
-- A job's payload in its hash (stored format 4, docs/design.md §9).
--
-- A hash stays a listpack, the server's compact form, only while every value
-- in it is at most hash-max-listpack-value bytes (64 by default); one longer
-- value turns the whole hash into a hashtable, which costs ~200 bytes more per
-- job (benchmarks/RESULTS.md, "A payload in pieces"). So a payload longer
-- than Text.PIECE bytes is stored in pieces of at most that many: "d" its
-- first, then "d2", "d3", ... up to Text.PIECES_MAX pieces, each cut at a UTF-8
-- character boundary (a client decoding a piece as UTF-8 never meets half a
-- character). A payload that would take more pieces is stored whole in "d":
-- its hash is a hashtable anyway, and against its size that costs little.
-- Every reader joins the pieces in order (Text.join_payload here; echomq.job on
-- the client): a job written before format 4 has only "d", which joins to
-- itself.
local Text = {}
Text.PIECE = 64
Text.PIECES_MAX = 16
-- the pieces' field names, and each name's place (numeric for: FUNCTION LOAD's
-- top level has no ipairs)
Text.PIECE_NAMES = {"d"}
Text.PIECE_AT = {d = 1}
for i = 2, Text.PIECES_MAX do
  Text.PIECE_NAMES[i] = "d" .. i
  Text.PIECE_AT["d" .. i] = i
end

-- The first n bytes of s, shortened so that no UTF-8 character is split (a
-- client decoding the reply as UTF-8 never meets half a character).
function Text.cut_utf8(s, n)
  while n > 0 do
    local b = string.byte(s, n + 1)
    if not b or b < 128 or b >= 192 then break end  -- s[n+1] starts a character
    n = n - 1
  end
  return string.sub(s, 1, n)
end

-- The pieces of ``data`` (a list of strings; one: stored whole).
function Text.payload_pieces(data)
  local size, piece = #data, Text.PIECE
  if size <= piece or size > piece * Text.PIECES_MAX then return {data} end
  local out, from = {}, 1
  while from <= size do
    local to = from + piece - 1
    if to < size then
      while to >= from do
        local b = string.byte(data, to + 1)
        if b < 128 or b >= 192 then break end  -- data[to + 1] starts a character
        to = to - 1
      end
      if to < from then to = from + piece - 1 end  -- not UTF-8: cut anywhere
    end
    out[#out + 1] = string.sub(data, from, to)
    from = to + 1
  end
  if #out > Text.PIECES_MAX then return {data} end
  return out
end

-- Append the payload's fields to ``fields`` (n entries so far); returns the new count.
function Text.put_payload(fields, n, data)
  if #data <= Text.PIECE then
    fields[n + 1], fields[n + 2] = "d", data
    return n + 2
  end
  local pieces = Text.payload_pieces(data)
  for i = 1, #pieces do
    fields[n + 1], fields[n + 2], n = Text.PIECE_NAMES[i], pieces[i], n + 2
  end
  return n
end

-- Write phase: replace the payload of the job hash ``jk`` with ``data``, with
-- ``...`` (name, value pairs) written beside it; the pieces the old payload
-- had beyond the new one's go.
function Text.replace_payload(jk, data, ...)
  local fields = {}
  local pieces = Text.put_payload(fields, 0, data) / 2
  for _, v in ipairs({...}) do fields[#fields + 1] = v end
  redis.call("HSET", jk, unpack(fields))
  if pieces < Text.PIECES_MAX then
    redis.call("HDEL", jk, unpack(Text.PIECE_NAMES, pieces + 1, Text.PIECES_MAX))
  end
end

-- The payload from its pieces, ``got`` a table of piece index -> text (nil
-- when the job has no payload field).
function Text.join_payload(got)
  if not got[2] then return got[1] end
  local n = 1
  while got[n + 1] do n = n + 1 end
  return table.concat(got, "", 1, n)
end

-- Cutting stored text short for a preview (listJobs, peekJob).

-- The first n bytes of s, shortened so that no UTF-8 character is split (a
-- client decoding the reply as UTF-8 never meets half a character).
local function cut_utf8(s, n)
  while n > 0 do
    local b = string.byte(s, n + 1)
    if not b or b < 128 or b >= 192 then break end  -- s[n+1] starts a character
    n = n - 1
  end
  return string.sub(s, 1, n)
end

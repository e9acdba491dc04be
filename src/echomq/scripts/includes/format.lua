-- The stored-format version (echomq.storage.FORMAT; tests/unit/test_storage.py
-- checks the two agree). The first add writes it into the meta hash as "v".
local FORMAT = "1"

"""includes/fixed.lua's fmt, which every script uses to store a number: an integer
exactly (up to 2^53) by integer printing, anything else as "%.0f" rounds it.
Run by the server's own Lua, from the include's source."""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from echomq.scripts import include_source

CASES = {
    "3": "3",
    "'12'": "12",  # a numeric string, as "%.0f" took it
    "-5": "-5",
    "1e15": "1000000000000000",
    "2^53 - 1": "9007199254740991",
    "-(2^53 - 1)": "-9007199254740991",
    "2^53 + 2": "9007199254740994",  # past the integer range: "%.0f"
    "3.7": "4",
    "1.25e3 + 0.5": "1250",  # a fraction rounds (half to even), as before
}


def test_fmt_prints_integers_exactly_and_rounds_anything_else(
    redis_client: redis.Redis | RedisCluster,
) -> None:
    calls = ", ".join(f"fmt({expression})" for expression in CASES)
    script = include_source("fixed") + f"\nreturn {{{calls}}}\n"
    replies = redis_client.eval(script, 1, "{numbers}")
    printed = [r.decode() if isinstance(r, bytes) else r for r in replies]
    assert dict(zip(CASES, printed, strict=True)) == CASES

"""Counting the script calls a server ran, from INFO commandstats.

A script call goes as FCALL/FCALL_RO (the function library) or, on a server
without functions, EVALSHA/EVAL (echomq.sending.scripts); tests that count
round trips count all four.
"""

from __future__ import annotations

from typing import Any

#: the commands that run one of echomq's scripts.
SCRIPT_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


def calls(client: Any, *commands: str) -> dict[str, int]:
    """Calls of each of ``commands`` (lower case) the server of ``client`` ran so far."""
    stats = client.info("commandstats")
    return {c: int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in commands}


def script_calls(client: Any) -> int:
    """Script calls (any of SCRIPT_COMMANDS) the server of ``client`` ran so far."""
    return sum(calls(client, *SCRIPT_COMMANDS).values())

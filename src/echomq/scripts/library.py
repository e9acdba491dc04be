"""The scripts as one function library (``FUNCTION LOAD`` / ``FCALL``, Valkey and Redis 7+).

The library is built from the same files as the scripts (echomq.scripts):
each ``NAME.lua``, includes expanded, becomes the body of one function,

    redis.register_function{function_name = "echomq_<version>_NAME",
                            callback = function(KEYS, ARGV) <NAME.lua> end}

so KEYS and ARGV mean what they mean in the script, and each script's
top-level locals stay local to its own function (the 200-locals limit and
each include are per function, as they are per script). ``<version>`` is a
hash of the whole library text: the library's name and every function's name
carry it, so a newer client never replaces the functions an older client
runs (two versions coexist on one server, each loading its own library).

Read-only scripts (READ_ONLY) are registered with the ``no-writes`` flag and
called with FCALL_RO: the server refuses a write from them, and they run on a
replica or a primary out of memory.

Why functions: a server looks up a function by name in a table, where
EVALSHA first hashes-and-finds the script and sets up a script run; and the
library is part of the server's data (saved, replicated to replicas), so a
promoted replica already has it. A server without functions keeps EVALSHA
(echomq.sending.scripts decides, per client).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from echomq.scripts import all_scripts

#: scripts that write nothing: registered ``no-writes``, called with FCALL_RO.
READ_ONLY = frozenset({"stats", "listJobs", "waitingTiers"})

#: hex digits of the library hash in its name (64 bits: two versions never collide).
VERSION_DIGITS = 16


@dataclass(frozen=True, slots=True)
class Library:
    """The library's name (``echomq_<version>``), its FUNCTION LOAD text, and version."""

    name: str
    source: str
    version: str

    def function(self, script: str) -> str:
        """The function that runs script ``script`` (``echomq_<version>_claim``)."""
        return f"{self.name}_{script}"


def _register(prefix: str, name: str, body: str) -> str:
    flags = ', flags = {"no-writes"}' if name in READ_ONLY else ""
    return (
        f'redis.register_function{{function_name = "{prefix}_{name}"{flags},\n'
        f"callback = function(KEYS, ARGV)\n{body}\nend}}\n"
    )


@cache
def library() -> Library:
    """The library of every script of the package (built once per process)."""
    scripts = all_scripts()

    def text(name: str) -> str:
        return "".join(_register(name, each, scripts[each].source) for each in sorted(scripts))

    version = hashlib.sha1(text("").encode()).hexdigest()[:VERSION_DIGITS]
    name = f"echomq_{version}"
    return Library(name, f"#!lua name={name}\n" + text(name), version)

"""The scripts as one function library (``FUNCTION LOAD`` / ``FCALL``, Valkey and Redis 7+).

The library is built from the same files as the scripts (echomq.scripts):
every include once, at the library's top level (run once, at FUNCTION LOAD:
the helper functions and constants are defined once per server, not on every
call), then each ``NAME.lua``'s body (its text without its include lines,
starting with ``start_call(KEYS, ARGV)``, includes/fixed.lua) as one function,

    redis.register_function{function_name = "echomq_<version>_NAME",
                            callback = function(KEYS, ARGV) <body of NAME.lua> end}

so KEYS and ARGV mean what they mean in the script, and each script's
top-level locals stay local to its own function. (A script that includes
``fixed`` has its body made once as a function of KEYS and ARGV, which the
callback runs between start_call and end_call: _WRAPPER_FIXED.) The includes' per-call
values (fixed keys, OPT, event and lane buffers) are library-level locals
that start_call sets at the start of every call, so no call sees another's.
Lua's limits then apply to the whole: at most 200 locals at the library's
top level (every include's), and at most 60 of them used by one function
(tests/integration/test_function_library.py loads it). ``<version>`` is a
hash of every file the library is built from: the library's name and every function's name
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

from echomq.scripts import (
    _HERE,
    END_CALL,
    START_CALL,
    _header,
    _included,
    all_scripts,
    include_order,
)
from echomq.storage import FORMAT

#: scripts that write nothing: registered ``no-writes``, called with FCALL_RO.
READ_ONLY = frozenset(
    {
        "stats",
        "listJobs",
        "findJobs",
        "listBatches",
        "peekBatch",
        "jobNames",
        "waitingTiers",
        "readEvents",
        "laneList",
        "listSchedules",
        "dependencyResults",
        "dependents",
        "peekJob",
        "position",
        "readLog",
        "listWorkers",
        "readMetrics",
        "oldestWaiting",
    }
)

#: hex digits of the library hash in its name (64 bits: two versions never collide).
VERSION_DIGITS = 16


@dataclass(frozen=True, slots=True)
class Library:
    """The library's name (``echomq_<version>``), its FUNCTION LOAD text, and version."""

    name: str
    source: str
    version: str


#: how each script is wrapped into a function (part of the version: a change renames).
_WRAPPER = (
    'redis.register_function{{function_name = "{function}"{flags},\n'
    "callback = function(KEYS, ARGV)\n{body}\nend}}\n"
)
#: how a script that includes ``fixed`` is wrapped: its body is a function made
#: once, at FUNCTION LOAD (a do-block's local: none of the library's top-level
#: locals), which the callback runs between start_call and end_call. (Made per
#: call, as the script's own text has it for EVALSHA, the closure over every
#: library local the body uses was built and collected on every call.)
_WRAPPER_FIXED = (
    "do\nlocal body = function(KEYS, ARGV)\n{body}\nend\n"
    'redis.register_function{{function_name = "{function}"{flags},\n'
    "callback = function(KEYS, ARGV)\n"
    "start_call(KEYS, ARGV) return end_call(body(KEYS, ARGV))\nend}}\n"
    "end\n"
)


@cache
def version() -> str:
    """A hash of everything the library is built from: each script file and include as
    written, the stored format, the wrapper, the per-call start and the read-only set. Cheaper than
    building the library (a call names its function without building it)."""
    digest = hashlib.sha1(
        f"{FORMAT}\n{_WRAPPER}\n{_WRAPPER_FIXED}\n{START_CALL}{END_CALL}\n{sorted(READ_ONLY)}\n".encode()
    )
    for path in sorted([*_HERE.glob("*.lua"), *_HERE.glob("includes/*.lua")]):
        digest.update(f"{path.relative_to(_HERE)}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:VERSION_DIGITS]


def library_name() -> str:
    """``echomq_<version>``: the library of this client's scripts."""
    return f"echomq_{version()}"


def function_name(script: str) -> str:
    """The function that runs script ``script`` (``echomq_<version>_claim``)."""
    return f"{library_name()}_{script}"


def _register(name: str, body: str) -> str:
    flags = ', flags = {"no-writes"}' if name in READ_ONLY else ""
    if body.startswith(START_CALL) and body.endswith(END_CALL):
        inner = body[len(START_CALL) : -len(END_CALL)]
        return _WRAPPER_FIXED.format(function=function_name(name), flags=flags, body=inner)
    return _WRAPPER.format(function=function_name(name), flags=flags, body=body)


@cache
def library() -> Library:
    """The library of every script of the package (built once per process, when a
    server first needs it loaded)."""
    scripts = all_scripts()
    top = _included(tuple(include_order()))
    body = "".join(_register(name, scripts[name].body) for name in sorted(scripts))
    source = f"#!lua name={library_name()}\n" + _header() + top + body
    return Library(library_name(), source, version())

"""The server-side scripts: one Lua file per transition, shared Lua in includes/.

``NAME-N.lua`` takes N KEYS; its header lists every KEYS[i], ARGV[i] and
return value. A line ``-- @include NAME`` is replaced by
``includes/NAME.lua`` when the script is loaded, and every script starts
with a line naming the stored format it was written for (echomq.storage),
so scripts of two formats never share a SHA1. Scripts are sent by SHA1
(EVALSHA); a server that does not know a script yet (first use, restart,
failover) gets its source once (echomq.sending).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from echomq.storage import FORMAT

_CONSTANT = r"^local {name} = (\d+)"
_INCLUDE = re.compile(r"^-- @include (\w+)\s*$", re.MULTILINE)
_FILE = re.compile(r"^(\w+)-(\d+)\.lua$")


@dataclass(frozen=True, slots=True)
class Script:
    """One loaded script: its name, the number of KEYS it takes, source and SHA1."""

    name: str
    numkeys: int
    source: str
    sha: str


def _read(relative: str) -> str:
    return resources.files(__package__).joinpath(relative).read_text(encoding="utf-8")


def _expand(source: str) -> str:
    return _INCLUDE.sub(lambda m: _read(f"includes/{m.group(1)}.lua"), source)


def _header() -> str:
    return f"-- echomq stored format {FORMAT}\n"


@cache
def all_scripts() -> dict[str, Script]:
    """Every script of the package by name (``claim``, ``add``, …)."""
    found: dict[str, Script] = {}
    for entry in resources.files(__package__).iterdir():
        match = _FILE.match(entry.name)
        if match is None:
            continue
        source = _header() + _expand(entry.read_text(encoding="utf-8"))
        sha = hashlib.sha1(source.encode()).hexdigest()
        found[match.group(1)] = Script(match.group(1), int(match.group(2)), source, sha)
    return found


def script(name: str) -> Script:
    return all_scripts()[name]


def include_source(name: str) -> str:
    """The text of one include (tests run includes on their own)."""
    return _read(f"includes/{name}.lua")


def budget(include: str, name: str) -> int:
    """A numeric ``local NAME = N`` of an include (the work budgets the tests check)."""
    match = re.search(_CONSTANT.format(name=re.escape(name)), include_source(include), re.M)
    if match is None:
        raise KeyError(f"includes/{include}.lua defines no number {name}")
    return int(match.group(1))

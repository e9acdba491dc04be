"""The server-side scripts: one Lua file per transition, shared Lua in includes/.

``NAME.lua`` takes the queue's fixed keys (``keys.QueueKeys.fixed()``, listed
in includes/fixed.lua) unless its first line says ``-- @keys N`` (then N
KEYS); its header lists every KEYS[i], ARGV[i] and return value. Adding a
fixed key therefore renames no script. A line ``-- @include NAME`` is replaced by
``includes/NAME.lua`` when the script is loaded, and every script starts
with a line naming the stored format it was written for (echomq.storage),
so scripts of two formats never share a SHA1. The scripts go as one function
library built from these files (echomq.scripts.library, FCALL), or by SHA1
(EVALSHA) on a server without functions; a server that does not know them
yet (first use, restart) gets them once (echomq.sending.scripts).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from echomq.keys import QueueKeys
from echomq.storage import FORMAT

_CONSTANT = r"^local {name} = (\d+)"
_ANY_QUEUE = "q"  # the number of fixed keys is the same for every queue
_INCLUDE = re.compile(r"^-- @include (\w+)\s*$", re.MULTILINE)
_FILE = re.compile(r"^(\w+)\.lua$")
_KEYS = re.compile(r"^-- @keys (\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Script:
    """One loaded script: its name, the number of KEYS it takes, source and SHA1."""

    name: str
    numkeys: int
    source: str
    sha: str


#: the package's own directory (pathlib, not importlib.resources: it is quicker to import
#: and the scripts always ship as plain files in the wheel)
_HERE = Path(__file__).parent


def _read(relative: str) -> str:
    return (_HERE / relative).read_text(encoding="utf-8")


def _expand(source: str) -> str:
    return _INCLUDE.sub(lambda m: _read(f"includes/{m.group(1)}.lua"), source)


def _header() -> str:
    return f"-- echomq stored format {FORMAT}\n"


@cache
def _files() -> dict[str, Path]:
    """Each script's file by script name (``claim`` → ``claim.lua``)."""
    found = {}
    for entry in sorted(_HERE.iterdir()):
        match = _FILE.match(entry.name)
        if match is not None:
            found[match.group(1)] = entry
    return found


@cache
def script(name: str) -> Script:
    """One script, loaded (read, includes expanded, hashed) on its first use only: a
    short command that sends one script does not load the others."""
    text = _files()[name].read_text(encoding="utf-8")
    declared = _KEYS.match(text)
    numkeys = int(declared.group(1)) if declared else len(QueueKeys(_ANY_QUEUE).fixed())
    source = _header() + _expand(text)
    sha = hashlib.sha1(source.encode()).hexdigest()
    return Script(name, numkeys, source, sha)


def all_scripts() -> dict[str, Script]:
    """Every script of the package by name (``claim``, ``add``, …)."""
    return {name: script(name) for name in _files()}


def include_source(name: str) -> str:
    """The text of one include (tests run includes on their own)."""
    return _read(f"includes/{name}.lua")


def budget(include: str, name: str) -> int:
    """A numeric ``local NAME = N`` of an include (the work budgets the tests check)."""
    match = re.search(_CONSTANT.format(name=re.escape(name)), include_source(include), re.M)
    if match is None:
        raise KeyError(f"includes/{include}.lua defines no number {name}")
    return int(match.group(1))

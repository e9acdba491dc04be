"""The server-side scripts: one Lua file per transition, shared Lua in includes/.

``NAME.lua`` takes the queue's fixed keys (``keys.QueueKeys.fixed()``, listed
in includes/fixed.lua) unless its first line says ``-- @keys N`` (then N
KEYS); its header lists every KEYS[i], ARGV[i] and return value. Adding a
fixed key therefore renames no script. A line ``-- @include NAME`` names an
include, ``includes/NAME.lua``: the script as sent by EVALSHA is the
includes it names, in that order, then its body (its text without those
lines), which begins with ``start_call(KEYS, ARGV)`` when it includes
``fixed`` (the per-call set-up, includes/fixed.lua); the function library
holds every include once at its top level and each script's body as a
function (echomq.scripts.library). Every script starts
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
    """One loaded script: its name, the number of KEYS it takes, source and SHA1, the
    includes it names (in order) and its body (what follows them in ``source``)."""

    name: str
    numkeys: int
    source: str
    sha: str
    includes: tuple[str, ...] = ()
    body: str = ""


#: the package's own directory (pathlib, not importlib.resources: it is quicker to import
#: and the scripts always ship as plain files in the wheel)
_HERE = Path(__file__).parent


def _read(relative: str) -> str:
    return (_HERE / relative).read_text(encoding="utf-8")


#: the first line of a body whose script includes ``fixed`` (includes/fixed.lua):
#: the per-call start, then the script's text as a function whose reply goes
#: through end_call (so every ``return`` of the script passes there)
START_CALL = "start_call(KEYS, ARGV) return end_call((function()\n"
#: the line that closes what START_CALL opens
END_CALL = "\nend)())\n"


def _split(text: str) -> tuple[tuple[str, ...], str]:
    """The includes a script's text names, in order, and its body: the text
    without those lines, after the per-call start if it includes ``fixed``."""
    names = tuple(_INCLUDE.findall(text))
    body = _INCLUDE.sub("", text)
    return names, (START_CALL + body + END_CALL if "fixed" in names else body)


def _included(names: tuple[str, ...]) -> str:
    return "".join(include_source(name).rstrip("\n") + "\n" for name in names)


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
    includes, body = _split(text)
    source = _header() + _included(includes) + body
    sha = hashlib.sha1(source.encode()).hexdigest()
    return Script(name, numkeys, source, sha, includes, body)


def all_scripts() -> dict[str, Script]:
    """Every script of the package by name (``claim``, ``add``, …)."""
    return {name: script(name) for name in _files()}


def include_source(name: str) -> str:
    """The text of one include (tests run includes on their own)."""
    return _read(f"includes/{name}.lua")


def include_order() -> list[str]:
    """Every include any script names, in an order that keeps each script's own
    order (an include comes after those it uses): the function library's top level."""
    after: dict[str, set[str]] = {}
    for entry in _files():
        names = script(entry).includes
        for i, name in enumerate(names):
            after.setdefault(name, set()).update(names[:i])
    order: list[str] = []
    while len(order) < len(after):
        ready = sorted(n for n in after if n not in order and after[n] <= set(order))
        if not ready:
            raise ValueError(f"the scripts name their includes in conflicting orders: {after}")
        order.append(ready[0])
    return order


def budget(include: str, name: str) -> int:
    """A numeric ``local NAME = N`` of an include (the work budgets the tests check)."""
    match = re.search(_CONSTANT.format(name=re.escape(name)), include_source(include), re.M)
    if match is None:
        raise KeyError(f"includes/{include}.lua defines no number {name}")
    return int(match.group(1))

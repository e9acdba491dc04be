"""The includes keep no state from one call to the next (no server: their source is read).

Under the function library an include's top-level code runs once, at
FUNCTION LOAD, and its top-level locals live as long as the library
(echomq.scripts.library). So a top-level local is either a constant
(UPPER_CASE, initialised where it is declared) or a per-call value declared
without a value and set at the start of every call: by ``start_call`` or by
a reset the include registers with ``on_call`` (includes/fixed.lua).
"""

from __future__ import annotations

import re

import pytest

from echomq.scripts import include_order, include_source

_TOP_LOCAL = re.compile(r"^local (?!function\b)([\w, ]+?)(?:\s*=\s*(.+))?$", re.MULTILINE)
_COMMENT = re.compile(r"\s*--.*$", re.MULTILINE)
_RESET = re.compile(r"^on_call\(function\(\)(.*?)end\)$", re.MULTILINE | re.DOTALL)
_START = re.compile(r"^local function start_call\(.*?\n(.*?)^end$", re.MULTILINE | re.DOTALL)
#: the one load-time registry: on_call appends to it while the library loads
_REGISTRY = {"call_resets"}


def _top_locals(source: str) -> list[tuple[list[str], str | None]]:
    found = []
    code = _COMMENT.sub("", source)
    for match in _TOP_LOCAL.finditer(code):
        names = [n.strip() for n in match.group(1).split(",")]
        found.append((names, match.group(2)))
    return found


def _set_per_call() -> str:
    """Every statement that runs at the start of a call: start_call and each reset."""
    text = ""
    for name in include_order():
        source = include_source(name)
        text += "".join(m.group(1) for m in _START.finditer(source))
        text += "".join(m.group(1) for m in _RESET.finditer(source))
    return text


def _is_module_table(name: str, value: str, source: str) -> bool:
    """An include written as a module (``local Rotation = {}``, then ``function
    Rotation.plan(...)`` and ``Rotation.FIELDS = ...`` at the top level): a table
    of functions and constants, set once at FUNCTION LOAD. It keeps no per-call
    state as long as nothing assigns a field of it inside a function (an
    indented ``Rotation.x =``)."""
    if not name[:1].isupper() or value.strip() != "{}":
        return False
    return re.search(rf"^[ \t]+{name}\.\w+\s*=[^=]", source, re.MULTILINE) is None


@pytest.mark.parametrize("include", include_order())
def test_every_top_level_local_is_a_constant_or_set_at_each_call(include: str) -> None:
    per_call = _set_per_call()
    for names, value in _top_locals(include_source(include)):
        for name in names:
            if name in _REGISTRY:
                continue
            if value is not None and _is_module_table(name, value, include_source(include)):
                continue
            if value is not None:
                assert name.isupper(), (
                    f"includes/{include}.lua: top-level local {name} = {value} keeps its value "
                    "from one call to the next under the function library: declare it without "
                    "a value and set it in an on_call reset (includes/fixed.lua)"
                )
            else:
                assert re.search(rf"\b{name}\b[\w, ]*=[^=]", per_call), (
                    f"includes/{include}.lua: per-call local {name} is set by neither "
                    "start_call nor an on_call reset"
                )


def test_the_check_sees_the_per_call_state() -> None:
    # the parsing above finds the state it exists to check
    per_call = _set_per_call()
    for name in ("K_META", "OPT", "event_count", "pending", "waiters_present"):
        assert re.search(rf"\b{name}\b[\w, ]*=[^=]", per_call), name
    names = {
        n
        for include in include_order()
        for ns, _ in _top_locals(include_source(include))
        for n in ns
    }
    assert {"pending", "EVENTS_LENGTH", "TIER_UNIT", "call_resets"} <= names

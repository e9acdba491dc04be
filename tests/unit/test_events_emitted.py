"""Every transition records its event (no server: the scripts' source is read).

tests/integration/test_events.py checks the events of a whole lifecycle on
every backend; this test fails when a script (or include) that changes a
job's state or deletes a job has no event next to that write, when a script
that records events does not write them before it returns, or when a kind
the scripts write is not one echomq.events.KINDS documents.
"""

from __future__ import annotations

import re
from pathlib import Path

from echomq.events import KINDS
from echomq.scripts import all_scripts

SCRIPTS = Path(__file__).parents[2] / "src" / "echomq" / "scripts"
#: a write of a job's state field, or a job's deletion
_STATE_WRITE = re.compile(r'"s", "(waiting|delayed|active|failed|completed|dead)"|drop_job\(id')
_EMIT = re.compile(r'\bemit\("(\w+)"')
#: calls that record events: emit itself, and the include functions that emit
_RECORDS = re.compile(r"\b(emit|bury|reap)\(")
#: lines around a state write in which its event must be recorded
NEAR = 10
#: transitions documented as silent (docs/lifecycle.md "Events"): a delayed or
#: retry-pending job becoming waiting at its next_run (promote, includes/time.lua)
SILENT = {("time.lua", "waiting", "promote")}


def _lua_files() -> list[Path]:
    return sorted([*SCRIPTS.glob("*.lua"), *SCRIPTS.glob("includes/*.lua")])


#: where the comment stripper stops: a comment's start, a long bracket (``[[``,
#: ``[==[``), a quoted string (with its escapes)
_LUA_TOKEN = re.compile(r"""--|\[=*\[|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""")
_LONG_OPEN = re.compile(r"\[(=*)\[")


def _long_end(source: str, at: int) -> int:
    """The end of the long bracket (string or comment body) opening at ``at``."""
    opening = _LONG_OPEN.match(source, at)
    assert opening is not None
    close = source.find(f"]{opening.group(1)}]", opening.end())
    return len(source) if close < 0 else close + len(opening.group(1)) + 2


def strip_lua_comments(source: str) -> str:
    """``source`` without its comments (``-- …`` and ``--[[ … ]]``), strings kept,
    and every newline kept, so line numbers stay: a commented-out ``emit(`` is
    no event."""
    out: list[str] = []
    at = 0
    while match := _LUA_TOKEN.search(source, at):
        start = match.start()
        out.append(source[at:start])
        if match.group() != "--":  # a string, short or long: kept whole
            end = _long_end(source, start) if source[start] == "[" else match.end()
            out.append(source[start:end])
        elif _LONG_OPEN.match(source, match.end()):  # a long comment: only its newlines
            end = _long_end(source, match.end())
            out.append("\n" * source.count("\n", start, end))
        else:  # a line comment: up to its newline
            newline = source.find("\n", start)
            end = len(source) if newline < 0 else newline
        at = end
    out.append(source[at:])
    return "".join(out)


def _code_lines(path: Path) -> list[str]:
    return strip_lua_comments(path.read_text(encoding="utf-8")).splitlines()


def test_the_comment_stripper_keeps_code_and_strings_only() -> None:
    source = (
        'emit("a", id) -- emit("b", id)\n'
        '-- emit("c", id)\n'
        '--[[ emit("d", id)\n'
        'emit("e", id) ]] local s = "-- not a comment" .. \'--\'\n'
        '--[==[ ]] emit("f") ]==] x = [[ -- kept ]]\n'
    )
    stripped = strip_lua_comments(source)
    assert _EMIT.findall(stripped) == ["a"]
    assert stripped.count("\n") == source.count("\n")
    assert '"-- not a comment"' in stripped and "'--'" in stripped
    assert "[[ -- kept ]]" in stripped


def _function_at(lines: list[str], index: int) -> str:
    for line in reversed(lines[: index + 1]):
        match = re.match(r"local function (\w+)", line)
        if match:
            return match.group(1)
    return ""


def test_every_state_write_has_an_event_next_to_it() -> None:
    forgotten = []
    for path in _lua_files():
        lines = _code_lines(path)
        for i, line in enumerate(lines):
            if line.lstrip().startswith("local function"):
                continue
            for match in _STATE_WRITE.finditer(line):
                state = match.group(1) or "deleted"
                if (path.name, state, _function_at(lines, i)) in SILENT:
                    continue
                near = lines[max(0, i - NEAR) : i + NEAR + 1]
                if not any(_EMIT.search(other) for other in near):
                    forgotten.append(f"{path.name}:{i + 1}: {line.strip()}")
    assert not forgotten, "state changes without an event:\n" + "\n".join(forgotten)


def test_scripts_that_record_events_write_them() -> None:
    for name, script in all_scripts().items():
        source = strip_lua_comments(script.source)
        if _EMIT.search(source):
            # an include that records events (retention, time) needs events.lua first
            assert "local function emit" in source, (
                f"{name}.lua uses an include that records events: add '-- @include events'"
                " after '-- @include clock'"
            )
            body = "\n".join(_code_lines(SCRIPTS / f"{name}.lua"))
            if _RECORDS.search(body):
                assert "flush_events()" in body, f"{name}.lua records events but never writes them"


def test_the_kinds_written_are_the_documented_kinds() -> None:
    written = {
        kind for path in _lua_files() for kind in _EMIT.findall("\n".join(_code_lines(path)))
    }
    assert written == set(KINDS)
    lifecycle = (Path(__file__).parents[2] / "docs" / "lifecycle.md").read_text(encoding="utf-8")
    for kind in (*KINDS, "missed"):
        assert f"`{kind}`" in lifecycle, f"docs/lifecycle.md does not list the kind {kind!r}"

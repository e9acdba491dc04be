"""Text read from the server (job names, errors, groups, keys), made safe to show:
the one place that escapes it, for the CLI's output and the worker's log lines.

Job data is anyone's: an error text with ``ESC]0;…BEL`` retitles a terminal,
``ESC[2J`` clears it, U+202E reorders what follows, and a newline in a log line
forges a line that looks like one of the worker's own.
"""

from __future__ import annotations

import re

#: characters that must not reach a terminal as they are: C0 controls but tab and
#: newline (ESC starts terminal sequences, CR rewrites a line), DEL, C1 controls
#: (U+009B is a one-byte CSI) and the bidirectional overrides that reorder text.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: the same, with tab and newline: a log line stays one line.
_UNSAFE_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _visible_in_line(match: re.Match[str]) -> str:
    return _NAMED.get(match.group()) or _visible(match)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


#: an opening bracket Rich would read as the start of a markup tag, with the backslashes
#: before it (Rich reads ``\\[b]`` as an escaped bracket, so those are doubled).
_TAG_START = re.compile(r"(\\*)\[(?=[a-z#/@])")


def _escape_markup(text: str) -> str:
    escaped = _TAG_START.sub(lambda m: m.group(1) * 2 + "\\[", text)
    # a lone trailing backslash would escape whatever markup follows the text
    trailing = len(escaped) - len(escaped.rstrip("\\"))
    return escaped + "\\" if trailing % 2 else escaped


def escape_text(text: str, *, markup: bool = True, json_text: bool = False) -> str:
    """``text`` read from the server, safe to print.

    Control characters and ESC sequences become visible escapes (``\\x1b``),
    and (unless ``markup=False``, for text that does not go through Rich's
    markup: plain lines, click's error line) Rich markup is escaped, so
    ``[link=…]`` or ``[/srv/in.csv]`` print as written instead of styling or
    crashing. ``json_text=True`` is for JSON already dumped: the escapes are
    JSON's own ``\\u009b``, so the decoded data is unchanged."""
    if json_text:
        return _UNSAFE.sub(_json_escape, text)
    visible = _UNSAFE.sub(_visible, text)
    return _escape_markup(visible) if markup else visible


def escape_line(value: object) -> str:
    """``value`` (a job's name, error, group, key…) as part of one log line: as
    :func:`escape_text` without markup, and newlines and tabs shown as ``\\n``
    and ``\\t`` too, so the line cannot be split or forged."""
    return _UNSAFE_IN_LINE.sub(_visible_in_line, str(value))

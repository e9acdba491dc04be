"""A job's stored traceback with the user's frames first (``echomq inspect``).

A handler's traceback starts with the worker's own frames (the executor that
called it, the thread pool that ran a sync handler): noise to someone asking
why their code failed. :func:`without_plumbing` drops, in each traceback of
the text (a chained exception has one per cause), the frames before the
first frame of the user's code when they are echomq's or the asyncio /
thread machinery that ran the handler; ``--full-traceback`` shows them all.
Frames of echomq called *by* the user's code stay (they say where it failed).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

import echomq

#: a frame's first line in Python's traceback text.
_FRAME = re.compile(r'^(\s*)File "(?P<path>[^"]*)", line \d+, in ')
#: the standard library modules that run a handler for the worker.
_MACHINERY = ("asyncio", "concurrent", "threading.py", "multiprocessing", "contextlib.py")
_PACKAGE = Path(echomq.__file__).parent


def _is_echomq(path: str) -> bool:
    """A file of the echomq package, wherever it was installed on the worker's host."""
    parts = PurePath(path).parts
    if "echomq" not in parts:
        return False
    inside = parts[len(parts) - 1 - parts[::-1].index("echomq") + 1 :]
    return bool(inside) and _PACKAGE.joinpath(*inside).is_file()


def _is_machinery(path: str) -> bool:
    parts = PurePath(path).parts
    in_stdlib = any(p.startswith("python3") for p in parts) and "site-packages" not in parts
    return _is_echomq(path) or (in_stdlib and any(m in parts for m in _MACHINERY))


def without_plumbing(text: str) -> tuple[str, int]:
    """``text`` without the leading echomq/runner frames of each traceback, and how
    many frames were left out. A traceback whose every frame is echomq's (a
    failure inside echomq itself) is kept whole."""
    lines = text.splitlines()
    out: list[str] = []
    hidden = 0
    i = 0
    while i < len(lines):
        if not _FRAME.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        frames: list[tuple[str, list[str]]] = []  # this traceback's frames, in order
        while i < len(lines) and (found := _FRAME.match(lines[i])):
            indent = len(found.group(1))
            body = [lines[i]]
            i += 1
            while i < len(lines) and _indent(lines[i]) > indent and not _FRAME.match(lines[i]):
                body.append(lines[i])
                i += 1
            frames.append((found.group("path"), body))
        lead = 0
        while lead < len(frames) and _is_machinery(frames[lead][0]):
            lead += 1
        if lead == len(frames):
            lead = 0  # all echomq's own: nothing of the user's to show first
        hidden += lead
        for _, body in frames[lead:]:
            out.extend(body)
    return "\n".join(out), hidden


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" ")) if line.strip() else 0

"""The stored-format version of a queue: what layout of keys and fields it was written in.

Every queue's meta hash carries the version of the layout its keys were
written in (field ``v``, set by the first add). A client reads it once, when
its queue first connects (the greeting, Engine.check_format), and

- refuses a queue written in a newer format than it knows
  (:class:`~echomq.errors.FormatTooNew`): an old client must not write jobs a
  newer one would misread;
- accepts its own format;
- upgrades an older one, or a queue with no version (written by echomq 0.1.0,
  whose layout is format 1, or not written yet), in one bounded script
  (scripts/upgrade.lua: from format 1 or 2 it writes the feature word, from
  format 1 it also moves the default lane's two counts into the meta hash,
  from format 3 it adds the tags letter to the word; it writes nothing where
  nothing is stored). Until a queue says 4 the scripts treat it as format 1:
  they read every feature's keys, as format 1 always did.

Scripts go as functions of a library named by a hash of its text (or, on a
server without functions, by their SHA1), so the code's name is its content:
a newer client's scripts never replace the ones an older client runs. The
format is part of every script's text (includes/fixed.lua's FORMAT, and each
script's first line), so two formats never share a name. docs/design.md §9
describes the formats, the upgrade and what a rolling deploy of mixed versions may do.
"""

from __future__ import annotations

from typing import Any

from echomq.errors import FormatTooNew

#: the format this client reads and writes.
FORMAT = 4
#: the meta hash field that holds it.
FORMAT_FIELD = "v"


def check_format(queue: str, raw: Any) -> int:
    """The stored format of ``queue`` from its meta field (None: not stored yet), or
    FormatTooNew if this client is older than the data."""
    stored = FORMAT if raw is None or raw == "" else int(raw)
    if stored > FORMAT:
        raise FormatTooNew(
            f"queue {queue!r} is stored in format {stored}; this echomq reads formats "
            f"up to {FORMAT}: upgrade echomq on this machine"
        )
    return stored

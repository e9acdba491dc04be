"""The stored-format version of a queue: what layout of keys and fields it was written in.

Every queue's meta hash carries the version of the layout its keys were
written in (field ``v``, set by the first add). A client reads it once, when
its queue first connects, and

- refuses a queue written in a newer format than it knows
  (:class:`~echomq.errors.FormatTooNew`): an old client must not write jobs a
  newer one would misread;
- accepts its own format, and a queue with no version yet (written before
  versions were stored: format 1 has the same layout);
- would upgrade an older format (format 1 is the first, so none exists yet:
  the client that introduces format 2 carries the step from 1).

Scripts go as functions of a library named by a hash of its text (or, on a
server without functions, by their SHA1), so the code's name is its content:
a newer client's scripts never replace the ones an older client runs. The
format is part of every script's text (includes/format.lua), so two formats
never share a name. docs/design.md §9 describes the upgrade path and what a
rolling deploy of mixed versions may do.
"""

from __future__ import annotations

from typing import Any

from echomq.errors import FormatTooNew

#: the format this client reads and writes.
FORMAT = 1
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

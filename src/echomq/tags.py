"""Tags on jobs, and the cursor that pages through what ``find`` finds (DESIGN §10).

A job carries at most :data:`MAX_TAGS` tags, each a key matching
``[a-z0-9_]{1,32}`` and a value of 1 to :data:`MAX_TAG_VALUE` characters.
The server keeps one index per tag (``keys.QueueKeys.tag``): a sorted set of
the ids of the jobs carrying it, scored by their creation time (server clock,
ms). A job's tags are written with it and leave every index when the job is
removed or pruned; a queue whose jobs carry no tags has no index and pays
nothing (DESIGN §9).

``find`` walks one index newest first (the smallest of those asked for) and
checks the other conditions on each job; its cursor is the position after
the last job it looked at (creation time and id), so a page continues where
the previous one stopped whatever was added or removed meanwhile.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from echomq.errors import InvalidOption

if TYPE_CHECKING:
    from echomq.job import Job

#: the most tags one job carries.
MAX_TAGS = 8
#: the longest tag value, in characters.
MAX_TAG_VALUE = 128
#: a tag key.
TAG_KEY = re.compile(r"[a-z0-9_]{1,32}")
#: the most jobs one find call (or cursor page of ``jobs``) lists.
MAX_FIND_COUNT = 1000
#: the longest cursor: a position and the ids of a page of MAX_FIND_COUNT jobs, base64.
MAX_CURSOR = 96 * 1024


def check_tags(tags: object) -> dict[str, str]:
    """``tags`` as a plain dict, or InvalidOption naming what is wrong (nothing written)."""
    if not isinstance(tags, Mapping):
        raise InvalidOption(f"tags {tags!r:.80} must be a mapping of tag keys to str values")
    if not 1 <= len(tags) <= MAX_TAGS:
        raise InvalidOption(f"tags hold {len(tags)} tags; allowed 1 … {MAX_TAGS}")
    out: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(key, str) or not TAG_KEY.fullmatch(key):
            raise InvalidOption(f"tag key {key!r:.60} must match [a-z0-9_]{{1,32}}")
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_TAG_VALUE:
            raise InvalidOption(
                f"tag {key}={value!r:.60} must have a str value of 1 … {MAX_TAG_VALUE} characters"
            )
        try:
            value.encode()
        except UnicodeEncodeError:
            raise InvalidOption(f"tag {key}={value!r:.60} is not valid UTF-8") from None
        out[key] = value
    return out


def encode_tags(tags: object) -> str:
    """A job's tags as stored (JSON text, keys sorted)."""
    return json.dumps(check_tags(tags), sort_keys=True, separators=(",", ":"))


def parse_tag_args(args: list[str]) -> dict[str, str]:
    """``key=value`` words (the CLI's ``echomq find``) as tags; InvalidOption otherwise."""
    tags: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            raise InvalidOption(f"tag {arg!r:.60} must be written key=value")
        tags[key] = value
    return check_tags(tags)


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a search or a cursor-paged listing: its jobs, and the cursor
    that continues after them (None: nothing more)."""

    jobs: list[Job] = field(default_factory=list)
    cursor: str | None = None


#: a position as the scripts write it: "<score> <member>", then for a listing
#: " <id>,<id>,…" (the ids its page showed; includes/paging.lua).
_POSITION = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)? [!-~]{1,200}(?: [!-~]*)?")


def _fingerprint(query: str, position: str) -> str:
    """A check over the query and the position: a cursor changed by hand, or
    handed to another query, no longer matches it (an integrity check, not a
    secret: a cursor names a place in a list, it grants nothing)."""
    return hashlib.blake2b(f"{query}\0{position}".encode(), digest_size=8).hexdigest()


def wrap_cursor(position: str, query: str) -> str | None:
    """The cursor a page hands out: the script's position, bound to ``query`` (a
    text naming what was asked) so it is refused by any other query; None when
    the script said nothing is left ("")."""
    if not position:
        return None
    encoded = base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")
    return f"{_fingerprint(query, position)}.{encoded}"


def check_cursor(cursor: object, query: str) -> str:
    """The script position inside a cursor that a page of ``query`` returned
    ("" starts at the first page); InvalidOption for anything else: a cursor of
    another query, or one changed by hand."""
    if cursor == "":
        return ""
    problem = f"cursor {cursor!r:.60} is not a cursor a page of this query returned"
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR:
        raise InvalidOption(problem)
    fingerprint, _, encoded = cursor.partition(".")
    try:
        position = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise InvalidOption(problem) from None
    if fingerprint != _fingerprint(query, position) or not _POSITION.fullmatch(position):
        raise InvalidOption(problem)
    return position

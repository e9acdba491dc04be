"""Decoders the domains share: a reply's hash, time, ids and refusal codes.

Each operation decodes its own reply shape in its domain's module, by name
(a NamedTuple over the script's reply, as its header lists it), never by a
bare index; these are the shapes several operations share.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from echomq.errors import SCRIPT_ERRORS, EchoMQError, raise_for_code
from echomq.job import Job


def ms(raw: Any) -> datetime | None:
    """A time in milliseconds (server clock) as a datetime; None for a negative one."""
    value = int(raw)
    return None if value < 0 else datetime.fromtimestamp(value / 1000, tz=UTC)


def pairs(reply: Any) -> dict[str, str]:
    """A hash reply as a dict (RESP2 gives a flat list, RESP3 a map)."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def ids(reply: Any) -> list[str]:
    """A list of job ids."""
    return [str(x) for x in reply]


def nothing(_: Any) -> None:
    """A reply that carries nothing for the caller."""
    return None


def is_code(reply: Any, code: int) -> bool:
    """Whether ``reply`` is the script return code ``code`` (errors.E_…)."""
    return isinstance(reply, int) and reply == code


def heads_code(reply: Any, code: int) -> bool:
    """Whether ``reply`` is a list whose first item is the return code ``code``
    (a refusal with details: ``{E_LANE_FULL, lane, …}``)."""
    return isinstance(reply, list) and bool(reply) and reply[0] == code


def check_code(reply: Any, detail: str) -> Any:
    """``reply``, unless it is a negative return code: then its exception (SCRIPT_ERRORS)."""
    if isinstance(reply, int) and reply < 0:
        raise_for_code(reply, detail)
    return reply


def error_for(code: Any, job_id: str) -> EchoMQError | None:
    """The exception one entry of a batch reply stands for (not raised), else None."""
    if isinstance(code, int) and code < 0:
        exc = SCRIPT_ERRORS.get(code, EchoMQError)
        return exc(f"job {job_id}: complete refused")
    return None


def fields_after_id(entry: Sequence[str]) -> dict[str, str]:
    """The field/value pairs that follow the id in one listing entry (no slice copies)."""
    if not len(entry) % 2:
        raise ValueError(f"job entry of {len(entry)} items: expected an id then pairs")
    rest = iter(entry)
    next(rest)
    return dict(zip(rest, rest, strict=False))  # even length checked above


def listed_jobs(reply: Sequence[Sequence[str]]) -> list[Job]:
    """listJobs.lua's reply: one entry per job, its id then its fields."""
    return [Job.from_hash(entry[0], fields_after_id(entry)) for entry in reply]

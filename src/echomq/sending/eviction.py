"""Whether the server may evict keys: one check per client, a loud warning if so.

A server whose ``maxmemory-policy`` is not ``noeviction`` deletes keys when it
runs out of memory: a job's hash, a lane, the meta hash. Adds were
acknowledged, the jobs are gone, and nothing says so (docs/delivery.md). So
each sender asks once, when its client first connects: ``CONFIG GET
maxmemory-policy``, or, where CONFIG is not allowed (an ACL, a managed
server that renames it), ``INFO memory``'s ``maxmemory_policy``; on a cluster
every node that answers. A policy other than ``noeviction`` is logged as a
warning on the ``echomq`` logger (a worker's queue connects when the worker
starts: it warns then) and kept on the sender (``eviction_policy``), where
the dashboard reads it for its banner. A server that answers neither read is
taken as it is, silently: the check must never stop a client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import redis

log = logging.getLogger("echomq")

SAFE_POLICY = "noeviction"
CONFIG_NAME = "maxmemory-policy"
INFO_FIELD = "maxmemory_policy"


def warning_text(policy: str) -> str:
    return (
        f"the server's maxmemory-policy is {policy!r}, not {SAFE_POLICY!r}: when it runs"
        " out of memory it deletes keys, and echomq's jobs vanish without a word"
        f" (docs/delivery.md). Set `maxmemory-policy {SAFE_POLICY}` (CONFIG SET or the"
        " server's config file)."
    )


def _policies(reply: Any, field: str) -> Iterator[str]:
    """Every value of ``field`` in a reply: a dict (a node's), a dict of node →
    reply (a cluster), or a flat [name, value] list (RESP2 CONFIG GET)."""
    if isinstance(reply, dict):
        if field in reply:
            yield str(reply[field])
            return
        for value in reply.values():
            yield from _policies(value, field)
    elif isinstance(reply, list | tuple):
        for name, value in zip(reply[::2], reply[1::2], strict=False):
            if name == field:
                yield str(value)


def judged(config: Any, info: Any) -> str | None:
    """The worst policy found (None: noeviction everywhere, or nothing read)."""
    found = list(_policies(config, CONFIG_NAME)) if config is not None else []
    if not found and info is not None:
        found = list(_policies(info, INFO_FIELD))
    risky = sorted({p for p in found if p != SAFE_POLICY})
    if not risky:
        return None
    policy = ", ".join(risky)
    log.warning("echomq: %s", warning_text(policy))
    return policy


async def check_async(client: Any) -> str | None:
    """Check the server of ``client``; warns and returns a risky policy."""
    config = info = None
    with contextlib.suppress(redis.RedisError, OSError):
        config = await client.config_get(CONFIG_NAME)
    if not config:
        with contextlib.suppress(redis.RedisError, OSError):
            info = await client.info("memory")
    return judged(config, info)


# generated from check_async by tools/unasync.py: edit that, then run it
def check(client: Any) -> str | None:
    """Check the server of ``client``; warns and returns a risky policy."""
    config = info = None
    with contextlib.suppress(redis.RedisError, OSError):
        config = client.config_get(CONFIG_NAME)
    if not config:
        with contextlib.suppress(redis.RedisError, OSError):
            info = client.info("memory")
    return judged(config, info)


# end generated

"""A url's password never shows in an error or a log line (issue 28, item 18): plain,
cluster and unix urls, with the password in the userinfo or as a query parameter,
that cannot be reached or are malformed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from echomq import Queue, SyncQueue
from echomq.connection import redact_url

SECRET = "hunter2-5e0c"

#: urls that fail: nothing listens on port 1, the socket does not exist, no scheme
URLS = [
    f"redis+cluster://:{SECRET}@127.0.0.1:1",
    f"valkey+cluster://app:{SECRET}@127.0.0.1:1",
    f"redis://:{SECRET}@127.0.0.1:1/0",
    f"unix://:{SECRET}@/nonexistent/echomq.sock",
    f"unix:///nonexistent/echomq.sock?db=0&password={SECRET}",
    f"app:{SECRET}@127.0.0.1:1",
]


def _shown(exc: BaseException) -> str:
    """Everything an error shows: its text, its repr, and its causes'."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None:
        parts += [str(seen), repr(seen)]
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


@pytest.mark.parametrize("url", URLS)
def test_a_blocking_queue_that_cannot_connect_hides_the_password(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as raised, SyncQueue("secrets", url) as q:
        q.stats()
    assert SECRET not in _shown(raised.value)
    assert SECRET not in caplog.text


@pytest.mark.parametrize("url", URLS)
def test_an_asyncio_queue_that_cannot_connect_hides_the_password(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def use() -> None:
        async with Queue("secrets", url) as q:
            await q.stats()

    with pytest.raises(Exception) as raised:
        asyncio.run(use())
    assert SECRET not in _shown(raised.value)
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
        ("unix://u:pw@/a.sock", "unix://u:***@/a.sock"),
        ("unix:///a.sock?password=pw&db=1", "unix:///a.sock?password=***&db=1"),
        ("'unix:///a.sock?db=1&PASSWORD=pw'", "'unix:///a.sock?db=1&PASSWORD=***'"),
        ("redis://h:1/0", "redis://h:1/0"),
    ],
)
def test_redact_url_hides_userinfo_and_query_passwords(text: str, shown: str) -> None:
    assert redact_url(text) == shown

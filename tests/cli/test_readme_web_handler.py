"""The README's "Enqueue and wait in a web handler", run as written.

The ``web.py`` block is read from README.md (after its ``<!-- web-handler:
web.py -->`` marker), imported with ECHOMQ_URL naming a private server, and
served in-process (httpx's ASGI transport) while a worker runs the
Getting-started ``tasks.py`` handlers on the same queue.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from cli.test_getting_started import README, readme_steps
from echomq import SyncQueue, Worker
from echomq.connection import URL_ENV
from servers import ServerFactory

MARKER = re.compile(r"<!-- web-handler: web.py -->\n```python\n(?P<body>.*?)\n```", re.S)


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_web_handler_answers_with_the_result(
    tmp_path: Path, server_factory: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = README.read_text(encoding="utf-8")
    match = MARKER.search(text)
    assert match is not None, "README lost its web-handler block"
    (tmp_path / "web.py").write_text(match["body"] + "\n", encoding="utf-8")
    (tmp_path / "tasks.py").write_text(readme_steps(text)["tasks.py"], encoding="utf-8")
    server = server_factory("valkey")
    monkeypatch.setenv(URL_ENV, server.url)
    with SyncQueue("mail") as admin:  # one attempt: the failing job is dead at once
        admin.configure(max_attempts=1)
    web = load(tmp_path / "web.py", "readme_web")
    tasks = load(tmp_path / "tasks.py", "readme_tasks")

    async def scenario() -> list[httpx.Response]:
        worker = Worker(web.q, tasks.handlers, concurrency=4)
        running = asyncio.create_task(worker.run(install_signals=False))
        transport = httpx.ASGITransport(app=web.app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://web") as http:
                return list(await asyncio.gather(http.post("/send/42"), http.post("/send/13")))
        finally:
            worker.stop()
            await running
            await web.q.close()

    ok, dead = asyncio.run(scenario())
    assert ok.status_code == 200 and ok.json()["result"] == {"sent_to": 42}
    assert dead.status_code == 502 and "mailbox" in dead.json()["error"]

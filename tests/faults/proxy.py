"""A small asyncio TCP proxy that misbehaves on purpose (loopback only).

Why: the network faults a job queue meets are not clean disconnects. Between
clients and the server this proxy, per forwarded chunk and at random:

- resets the connection (both sides aborted, like a RST);
- blackholes it: forwards nothing either way for 0.5–3 s, then resets it
  (a silent network partition that TCP eventually notices);
- drops a reply: the server has executed the command, the reply is thrown
  away and the connection is reset, so the client cannot know whether its
  command ran (the case idempotency keys exist for).

It runs its own event loop on a daemon thread, so synchronous tests and
worker subprocesses can both use it. ``chaos = False`` makes it a plain proxy.
``drop_reply_to = b"marker"`` loses exactly one reply, deterministically: that
of the first request containing the marker (then the connection is reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from dataclasses import dataclass

_CHUNK = 65536


@dataclass
class Odds:
    """Per-chunk probabilities of each fault."""

    reset: float = 0.01
    blackhole: float = 0.003
    drop_reply: float = 0.01


class ChaosProxy:
    """Listen on a free loopback port, forward to ``target_port``, inject faults."""

    def __init__(self, target_port: int, odds: Odds | None = None, seed: int = 0) -> None:
        self.target_port = target_port
        self.odds = odds or Odds()
        self.chaos = True
        self.drop_reply_to: bytes | None = None
        self.faults: Counter[str] = Counter()
        self.port = 0
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._frozen: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._armed: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w, server_w)
        self._writers.update(pair)
        try:
            await asyncio.gather(
                self._pump(client_r, server_w, pair, upstream=True),
                self._pump(server_r, client_w, pair, upstream=False),
            )
        finally:
            for writer in pair:
                writer.transport.abort()
                self._writers.discard(writer)

    def _roll(self, upstream: bool) -> str | None:
        """The fault to inject for one chunk, if any."""
        if not self.chaos:
            return None
        x = self._rng.random()
        if x < self.odds.reset:
            return "reset"
        x -= self.odds.reset
        if x < self.odds.blackhole:
            return "blackhole"
        x -= self.odds.blackhole
        if not upstream and x < self.odds.drop_reply:
            return "drop_reply"
        return None

    def _targeted(
        self, data: bytes, pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter], upstream: bool
    ) -> str | None:
        """The one-shot ``drop_reply_to`` fault: arm on the request, fire on its reply."""
        if upstream:
            if self.drop_reply_to is not None and self.drop_reply_to in data:
                self.drop_reply_to = None
                self._armed.add(pair)
            return None
        if pair in self._armed:
            self._armed.discard(pair)
            return "drop_reply"
        return None

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
        *,
        upstream: bool,
    ) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(_CHUNK):
                if pair in self._frozen:
                    continue  # blackholed: swallow everything until the reset
                fault = self._targeted(data, pair, upstream) or self._roll(upstream)
                if fault is not None:
                    self.faults[fault] += 1
                    if fault == "blackhole":
                        self._frozen.add(pair)
                        await asyncio.sleep(self._rng.uniform(0.5, 3.0))
                        self._frozen.discard(pair)
                    for end in pair:  # reset: drop_reply lands here with the reply unsent
                        end.transport.abort()
                    return
                writer.write(data)
                await writer.drain()
        for end in pair:
            end.transport.abort()

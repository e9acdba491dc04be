"""Server instructions per drained job and per one-job call, under valgrind (issue 20).

On a busy shared machine the server's CPU time per job moves by ±20 % from
one run to the next; the number of instructions the server executes does
not. This starts a private Valkey under ``valgrind --tool=callgrind`` (about
50× slower, so small sizes) and reads its instruction count (``Ir``) around:

- ``add_Ir``: ``add()`` of one job, ``--calls`` times (per call);
- ``claim1_Ir``: ``claim(1)`` with 1,000 jobs waiting (per call);
- ``complete_Ir``: ``complete()`` of each job those claims leased (per call);
- ``drain_Ir_per_job``: a drain of ``--jobs`` no-op jobs by ``echomq.Worker``
  at ``--concurrency`` (per job; start-up and shutdown included).

``--stored-setting``: the same on a queue with a stored setting
(``event_stream_length`` 0, so no events), which every call reads.
``--warm N``: N calls of each kind before the counted ones, not counted
(the steady state: the first calls' one-off work, such as filling the
scripts' caches, and the garbage a previous phase left for Lua's collector
are not charged to the calls measured).

Counts include everything the server does for the calls (reading the
request, the script, the reply). To compare two versions, run it under each
(``PYTHONPATH=…/src``); the same version's runs differ by about 1-2 %.
``--keep`` leaves the callgrind dumps (named in the output) for
``callgrind_annotate``.

    python benchmarks/server_instructions.py [--jobs 1000] [--calls 200]

This is a measurement, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
import redis
from drain_cost import drain_noops

import echomq
from echomq import Queue

QUEUE = "bench"
LEASE = 300.0  # valgrind slows the server: no lease may run out during a drain


class GrindServer:
    """A private Valkey under callgrind, whose instruction counter can be zeroed and read."""

    def __init__(self) -> None:
        binary = harness.valkey_binary()
        if binary is None or shutil.which("valgrind") is None:
            raise SystemExit("needs valgrind and the embedded Valkey binary")
        self.dir = Path(tempfile.mkdtemp(prefix="echomq-grind-"))
        self.port = harness.free_port()
        self.process = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={self.dir}/callgrind.out",
                binary,
                *harness.server_args(self.port, str(self.dir)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.dumps: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with redis.Redis(port=self.port, socket_timeout=5) as client:
                    client.ping()
                return
            except redis.RedisError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit("the server under valgrind did not answer")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def zero(self) -> None:
        subprocess.run(
            ["callgrind_control", "-z", str(self.process.pid)], check=True, capture_output=True
        )

    def read(self) -> int:
        """Instructions since the last zero (dumps the counters)."""
        before = set(self.dir.glob("callgrind.out*"))
        subprocess.run(
            ["callgrind_control", "-d", str(self.process.pid)], check=True, capture_output=True
        )
        dump = sorted(set(self.dir.glob("callgrind.out*")) - before)[-1]
        self.dumps.append(str(dump))
        found = re.search(r"^summary: (\d+)", dump.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"no summary in {dump}")
        return int(found.group(1))

    def stop(self, keep: bool = False) -> None:
        self.process.terminate()
        self.process.wait()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


async def measure(
    server: GrindServer,
    jobs: int,
    calls: int,
    concurrency: int,
    stored: bool = False,
    warm: int = 0,
) -> dict[str, float]:
    raw = redis.Redis(port=server.port)
    q = Queue(QUEUE, server.url)
    out: dict[str, float] = {}

    async def fresh() -> None:
        raw.flushall()
        if stored:  # a queue with a stored setting (events off)
            await q.configure(event_stream_length=0)

    try:
        await q.add("noop")  # the library loaded before counting
        await fresh()
        for _ in range(warm):
            await q.add("noop")
        server.zero()
        for _ in range(calls):
            await q.add("noop")
        out["add_Ir"] = server.read() / calls
        await q.add_many([{"name": "noop"} for _ in range(1000)])
        leased = [(await q.claim(1, LEASE))[0] for _ in range(warm)]
        server.zero()
        leased += [(await q.claim(1, LEASE))[0] for _ in range(calls)]
        out["claim1_Ir"] = server.read() / calls
        for job in leased[:warm]:
            await q.complete(job, None)
        server.zero()
        for job in leased[warm:]:
            await q.complete(job, None)
        out["complete_Ir"] = server.read() / calls
        await fresh()
        for start in range(0, jobs, 1000):
            await q.add_many(
                [{"name": "noop", "data": i} for i in range(start, min(jobs, start + 1000))]
            )
        server.zero()
        await drain_noops(q, jobs, concurrency=concurrency, lease=LEASE)
        out["drain_Ir_per_job"] = server.read() / jobs
    finally:
        await q.close()
        raw.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--label", default="", help="names the run in the output")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind dumps")
    parser.add_argument(
        "--stored-setting",
        action="store_true",
        help="the queue has a stored setting (event_stream_length 0: no events)",
    )
    parser.add_argument(
        "--warm",
        type=int,
        default=0,
        help=(
            "uncounted calls of each kind before its counted ones: the steady state, "
            "without the first calls' one-off work (caches filled, the previous "
            "phase's garbage collected)"
        ),
    )
    args = parser.parse_args()
    server = GrindServer()
    try:
        figures = asyncio.run(
            measure(server, args.jobs, args.calls, args.concurrency, args.stored_setting, args.warm)
        )
        result: dict[str, Any] = {"label": args.label, "echomq": echomq.__file__}
        if args.stored_setting:
            result["stored_setting"] = True
        if args.warm:
            result["warm"] = args.warm
        result.update({k: round(v) for k, v in figures.items()})
        if args.keep:
            result["dumps"] = server.dumps
        print(json.dumps(result))
    finally:
        server.stop(keep=args.keep)


if __name__ == "__main__":
    main()

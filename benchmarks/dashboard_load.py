"""How long the dashboard's views take to show in Chromium on a large queue (issue 30).

A private server (harness.BenchServer) gets one queue of ``--jobs`` jobs
(default 10^5) over ``--lanes`` lanes (default 10^3), each tagged
``customer=<i mod 1000>``; 1 % of them are completed and 1 % dead. The
dashboard (``create_app``, served by uvicorn on a loopback port) is opened
in headless Chromium (Debian's ``chromium``, driven by Playwright) and each
view is timed from the click (or the page load) until its rows are drawn:

- ``open``: the page loaded until the queue view, its lane ring and the
  waiting list show (``first open``: the same, the first time in a browser
  just started, timed apart: it includes the browser's own start-up);
- ``tab <state>``: a job list tab;
- ``next page``: the waiting list's second page (by cursor);
- ``search``: a search by tag (``customer=42``);
- ``inspect``: a job in the inspector.

Each view is timed ``--rounds`` times; the median and the slowest are
reported (ms). ``--screenshot PATH`` saves the jobs panel after a search.

    python benchmarks/dashboard_load.py [--jobs N] [--lanes N] [--screenshot docs/img/x.png]
    python benchmarks/dashboard_load.py --write-results  # and replaces its section of RESULTS.md

A measurement, not a test: nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import harness  # noqa: E402
import httpx  # noqa: E402
import uvicorn  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from echomq import SyncQueue  # noqa: E402
from echomq.web.app import create_app  # noqa: E402

CHUNK = 1000
VIEWPORT = {"width": 1440, "height": 1000}
STATES = ("waiting", "delayed", "active", "completed", "dead")
START, END = "<!-- dashboard_load:start -->", "<!-- dashboard_load:end -->"


def fill(q: SyncQueue, jobs: int, lanes: int) -> None:
    for start in range(0, jobs, CHUNK):
        q.add_many(
            [
                {
                    "name": f"task-{i % 7}",
                    "data": {"i": i},
                    "group": f"tenant-{i % lanes}",
                    "priority": i % 3,
                    "tags": {"customer": str(i % 1000)},
                    "max_attempts": 1,
                }
                for i in range(start, min(jobs, start + CHUNK))
            ]
        )
    finished = jobs // 100
    for done in range(2):  # 1 % completed, then 1 % dead
        left = finished
        while left:
            claimed = q.claim(min(left, 1000))
            if not claimed:
                break
            if done == 0:
                q.complete_many([(job, {"ok": True}) for job in claimed])
            else:
                for job in claimed:
                    q.fail(job, "boom")
            left -= len(claimed)
    q.claim(50)  # some active


def serve(url: str, queue: str) -> tuple[str, uvicorn.Server, threading.Thread]:
    app = create_app(url, [queue], None, interval=2.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", server, thread


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


class Views:
    """The timed views of one page; ``ids`` names a job each view must show."""

    def __init__(self, page: Any, base: str, queue: str, ids: dict[str, str]) -> None:
        self.page, self.base, self.queue, self.ids = page, base, queue, ids
        self.samples: dict[str, list[float]] = {}

    def record(self, label: str, action: Callable[[], None]) -> None:
        self.samples.setdefault(label, []).append(timed(action))

    def shows(self, job_id: str) -> None:
        self.page.wait_for_selector(f'#jobs tbody tr[data-job-id="{job_id}"]')

    def load(self) -> None:
        # a new document each time (the same url again would only change its fragment)
        self.page.goto("about:blank")
        self.page.goto(f"{self.base}/#q={self.queue}")
        self.page.wait_for_selector("#lanes tbody tr")
        self.shows(self.ids["waiting"])

    def tab(self, state: str) -> None:
        self.page.click(f'#job-tabs button[data-state="{state}"]')
        self.shows(self.ids[state])

    def next_page(self) -> None:
        self.page.click('#jobs-pager button[data-page="next"]')
        self.page.wait_for_function(
            "first => document.querySelector('#jobs tbody tr').dataset.jobId !== first",
            arg=self.ids["waiting"],
        )

    def search(self) -> None:
        self.page.fill("#search-tags", "customer=42")
        self.page.click("#search-form button[type=submit]")
        self.shows(self.ids["customer 42"])

    def inspect(self) -> None:
        job_id = self.ids["customer 42"]
        self.page.click(f'#jobs tbody tr[data-job-id="{job_id}"]')
        self.page.wait_for_selector(f'#inspector[data-job-id="{job_id}"]')

    def round(self) -> None:
        self.record("open", self.load)
        for state in [s for s in STATES if s in self.ids]:
            self.record(f"tab {state}", lambda state=state: self.tab(state))
        self.tab("waiting")
        if self.page.is_enabled('#jobs-pager button[data-page="next"]'):  # a page 2
            self.record("next page", self.next_page)
        self.record("search", self.search)
        self.record("inspect", self.inspect)
        self.page.click("#search-clear")

    def results(self) -> dict[str, Any]:
        return {
            label: {"median_ms": round(statistics.median(v), 1), "max_ms": round(max(v), 1)}
            for label, v in self.samples.items()
        }


def measure(page: Any, base: str, queue: str, ids: dict[str, str], rounds: int) -> dict[str, Any]:
    views = Views(page, base, queue, ids)
    # the browser's first navigation (its own start-up: seconds on a busy machine) apart
    views.record("first open (a browser just started)", views.load)
    for _ in range(rounds):
        views.round()
    return views.results()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lanes", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--screenshot", type=Path)
    parser.add_argument("--write-results", action="store_true", help="update RESULTS.md")
    args = parser.parse_args()
    chromium = os.environ.get("ECHOMQ_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("no chromium (Debian: apt-get install chromium)")
    with harness.probed_server("valkey") as (server, _probe), SyncQueue("big", server.url) as q:
        started = time.monotonic()
        fill(q, args.jobs, args.lanes)
        fill_s = time.monotonic() - started
        ids = {"customer 42": q.find({"customer": "42"}, count=1).jobs[0].id}
        for state in STATES[1:]:
            listed = q.jobs(state, count=1)
            if listed:
                ids[state] = listed[0].id
        base, web, thread = serve(server.url, q.name)
        # the waiting list shows the ring's first lane, as the page's queue view lists it
        head = httpx.get(f"{base}/api/queues/{q.name}", timeout=30).json()["lanes"][0]["label"]
        group = None if head == "(default)" else head
        ids["waiting"] = q.jobs("waiting", group=group, count=1)[0].id
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_context(viewport=VIEWPORT).new_page()
                page.set_default_timeout(30_000)
                states = [s for s in STATES if s in ids or s == "waiting"]
                chromium_version = browser.version
                results = measure(page, base, q.name, ids, args.rounds)
                if args.screenshot:
                    page.fill("#search-tags", "customer=42")
                    page.click("#search-form button[type=submit]")
                    page.wait_for_selector(f'#jobs tbody tr[data-job-id="{ids["customer 42"]}"]')
                    # the jobs panel: the search, its results and the pager
                    panel = page.locator("section.panel", has=page.locator("#search-form"))
                    panel.screenshot(path=str(args.screenshot))
                browser.close()
        finally:
            web.should_exit = True
            thread.join(10)
        report = {
            "server": server.label,
            "jobs": args.jobs,
            "lanes": args.lanes,
            "fill_seconds": round(fill_s, 1),
            "rounds": args.rounds,
            "views": results,
            "chromium": chromium_version,
        }
        if args.write_results:
            harness.write_results_section(START, END, render(report))
        print(
            json.dumps(
                {
                    "server": server.label,
                    "jobs": args.jobs,
                    "lanes": args.lanes,
                    "states_timed": states,
                    "fill_seconds": round(fill_s, 1),
                    "rounds": args.rounds,
                    "views": results,
                },
                indent=2,
            )
        )


def render(report: dict[str, Any]) -> str:
    """The RESULTS.md section of this run: machine, versions, median and slowest per view."""
    from importlib.metadata import version

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cpu = platform.processor() or platform.machine()
    rows = [
        f"| {view} | {figures['median_ms']:.0f} | {figures['max_ms']:.0f} |"
        for view, figures in report["views"].items()
    ]
    return "\n".join(
        [
            START,
            "## Dashboard views on a queue of 10^5 jobs in 10^3 lanes (issue 30)",
            "",
            f"`python benchmarks/dashboard_load.py --write-results` ({when}; {cpu}, "
            f"{os.cpu_count()} cores shared with other work, 1-minute load average "
            f"{os.getloadavg()[0]:.1f}; Python {platform.python_version()}, "
            f"{report['server']} (a private server the script starts), Chromium "
            f"{report['chromium']} headless, Playwright {version('playwright')}). One queue "
            f"of {report['jobs']:,} jobs over {report['lanes']:,} lanes, each tagged "
            "`customer=<i mod 1000>`, 1 % completed and 1 % dead (filled in "
            f"{report['fill_seconds']} s); each view timed from the click (or the page "
            "load) until its rows are drawn, measured from Python around Playwright's "
            f"calls, {report['rounds']} rounds, ms:",
            "",
            "| view | median | slowest |",
            "| --- | ---: | ---: |",
            *rows,
            "",
            "The issue's aim is every view within 1 s; tests/web/test_large_queue.py asserts",
            "it with the browser's own clock (performance.now()) on every view.",
            END,
        ]
    )


if __name__ == "__main__":
    main()

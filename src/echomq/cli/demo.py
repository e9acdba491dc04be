"""``echomq demo``: tiers and weighted lanes at work, on the embedded server.

Three tenants share one queue: acme (weight 3), globex (weight 2) and
initech (weight 1). Each gets the same number of jobs, mostly tier-1
"report" jobs with some tier-0 "alert" jobs added after them. A fourth
tenant, umbrella, is capped (``set_lane(concurrency=1)``): at most one of its
jobs runs at a time, and while it runs the rotation passes umbrella over
without disturbing the others. Producers add while a Worker drains; one
progress bar per lane shows the 3 : 2 : 1 rotation live. At the end two
tables show the server's claim counts while
all three lanes were backlogged (the measured share against the share the
weights promise) and the first claims in order (alerts before earlier
reports within a lane, lanes taking turns across).

The demo uses a fresh queue ``demo-<random>`` and deletes its keys at the end.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from echomq import score as codec
from echomq import urls
from echomq.cli.common import CONTEXT_SETTINGS, console, percent
from echomq.job import Job
from echomq.queue import Queue

#: (group, weight) of the demo's lanes, in the order they join the ring.
LANES: tuple[tuple[str, int], ...] = (("acme", 3), ("globex", 2), ("initech", 1))
#: the capped lane shown next to the weighted ones: (group, concurrency cap).
CAPPED: tuple[str, int] = ("umbrella", 1)
CAPPED_SHARE = 30  # the capped lane gets one job per 30 of the weighted lanes
ALERT_EVERY = 5  # one job in five is a tier-0 alert
FIRST_CLAIMS = 20


@dataclass(frozen=True, slots=True)
class Claim:
    """One job as its handler started: the claim order the demo prints."""

    group: str
    tier: int
    counter: int
    score: int
    name: str


def _per_lane() -> dict[str, int]:
    return {group: 0 for group, _ in LANES}


@dataclass(slots=True)
class DemoRun:
    """What the demo observed while it ran.

    The share window counts claims per lane from the start until the first
    claim that takes a lane's last added job: up to then every lane had
    waiting jobs. (``added`` is counted after the server acknowledged the
    add, so the window can only close early, never late.)
    """

    per_lane: int
    capped_jobs: int = 0
    claims: list[Claim] = field(default_factory=list)
    added: dict[str, int] = field(default_factory=_per_lane)
    claimed: dict[str, int] = field(default_factory=_per_lane)
    done: dict[str, int] = field(default_factory=_per_lane)
    window: dict[str, int] = field(default_factory=_per_lane)
    window_open: bool = True
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    capped_running: int = 0  # the capped lane's jobs running now (the handler's count)
    capped_most: int = 0  # the most of them that ever ran at once
    capped_done: int = 0

    @property
    def total(self) -> int:
        return self.per_lane * len(LANES) + self.capped_jobs

    def record_claim(self, claim: Claim) -> None:
        self.claims.append(claim)
        if claim.group == CAPPED[0]:
            self.capped_running += 1
            self.capped_most = max(self.capped_most, self.capped_running)
            return
        self.claimed[claim.group] += 1
        if self.window_open:
            self.window[claim.group] += 1
            self.window_open = self.claimed[claim.group] < self.added[claim.group]

    def record_done(self, group: str) -> None:
        if group == CAPPED[0]:
            self.capped_running -= 1
            self.capped_done += 1
        else:
            self.done[group] += 1
        if sum(self.done.values()) + self.capped_done >= self.total:
            self.finished.set()


def lane_jobs(
    group: str, count: int, start: int, alerts: int | None = None
) -> list[dict[str, Any]]:
    """``count`` jobs for one lane: tier-1 reports, then ``alerts`` tier-0 alerts.

    ``alerts`` defaults to one job in ALERT_EVERY. The alerts are added after
    the reports, so their counters are higher and only their tier puts them first.
    """
    n_alerts = min(count, count // ALERT_EVERY if alerts is None else alerts)
    return [
        {
            "name": "alert" if i >= start + count - n_alerts else "report",
            "data": {"n": i},
            "priority": 0 if i >= start + count - n_alerts else 1,
            "group": group,
        }
        for i in range(start, start + count)
    ]


async def produce(queue: Queue, run: DemoRun, first: int, rounds: int) -> None:
    """After the first ``first`` jobs per lane (added by the caller), add the rest in rounds.

    Each round waits first, so the worker's first claims come from the first batch.
    """
    left, start = run.per_lane - first, first
    for r in range(rounds):
        await asyncio.sleep(0.15)
        size = left // (rounds - r)
        if size:
            await queue.add_many([job for g, _ in LANES for job in lane_jobs(g, size, start)])
            for group, _ in LANES:
                run.added[group] += size
        start, left = start + size, left - size


def make_handler(
    run: DemoRun, progress: Progress, bars: dict[str, TaskID], work: float
) -> Callable[[Job], Awaitable[dict[str, str]]]:
    """The demo's handler: record the claim, update the bars, take ``work`` seconds."""

    async def handle(job: Job) -> dict[str, str]:
        group = job.group or ""
        decoded = codec.decode(job.score)
        run.record_claim(Claim(group, decoded.tier, decoded.counter, job.score, job.name))
        window = sum(run.window.values())
        for lane, _ in LANES:
            progress.update(bars[lane], share=percent(run.window[lane], window))
        await asyncio.sleep(work)
        run.record_done(group)
        progress.advance(bars[group])
        return {"lane": group}

    return handle


def new_progress() -> Progress:
    return Progress(
        TextColumn("{task.description:<18}"),
        BarColumn(bar_width=40),
        MofNCompleteColumn(),
        TextColumn("share {task.fields[share]:>6}  ({task.fields[note]})"),
        console=console,
        transient=False,
    )


async def prepare(queue: Queue, run: DemoRun) -> int:
    """Set the weights and the cap, add the first batch and all the capped lane's
    jobs; returns how many jobs per weighted lane it added."""
    for group, weight in LANES:
        await queue.set_weight(group, weight)
    await queue.set_lane(CAPPED[0], concurrency=CAPPED[1])
    first = max(1, run.per_lane * 2 // 5)
    # only two alerts per lane in the first batch, so the first claims show both tiers
    await queue.add_many([job for g, _ in LANES for job in lane_jobs(g, first, 0, alerts=2)])
    for group, _ in LANES:
        run.added[group] += first
    await queue.add_many(
        [
            {"name": "report", "data": {"n": i}, "priority": 1, "group": CAPPED[0]}
            for i in range(run.capped_jobs)
        ]
    )
    return first


def lane_bars(progress: Progress, per_lane: int) -> dict[str, TaskID]:
    weight_total = sum(w for _, w in LANES)
    bars = {
        g: progress.add_task(
            f"{g} (weight {w})",
            total=per_lane,
            share="–",
            note=f"weight {percent(w, weight_total)}",
        )
        for g, w in LANES
    }
    return bars


def capped_bar(progress: Progress, jobs: int) -> TaskID:
    group, cap = CAPPED
    return progress.add_task(
        f"{group} (cap {cap})", total=jobs, share="–", note=f"at most {cap} at once"
    )


async def run_demo(
    url: str | None,
    per_lane: int,
    concurrency: int,
    work: float,
    queue_name: str,
    capped_jobs: int = 3,
) -> tuple[DemoRun, float, str]:
    """Produce, work and watch until every job is done (or Ctrl-C); always drop the queue."""
    from echomq.worker import Worker

    queue = Queue(queue_name, url, keep_completed=0, keep_completed_age=0)
    run = DemoRun(per_lane, capped_jobs)
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    try:
        first = await prepare(queue, run)
        with new_progress() as progress:
            bars = lane_bars(progress, per_lane)
            bars[CAPPED[0]] = capped_bar(progress, capped_jobs)
            handler = make_handler(run, progress, bars, work)
            worker = Worker(queue, {"report": handler, "alert": handler}, concurrency=concurrency)
            started = time.perf_counter()
            producer = asyncio.create_task(produce(queue, run, first, rounds=8))
            running = asyncio.create_task(worker.run(install_signals=False))
            await first_of(run.finished, interrupted, running)
            elapsed = time.perf_counter() - started
            worker.stop(immediate=interrupted.is_set())
            await running
            if interrupted.is_set():
                producer.cancel()
            await asyncio.gather(producer, return_exceptions=interrupted.is_set())
        if interrupted.is_set():
            raise click.Abort
        resolved = urls.resolve_url(queue.url)
        embedded = not queue.url and not os.environ.get(urls.URL_ENV)
        server = f"the embedded Valkey ({resolved})" if embedded else resolved
        return run, elapsed, server
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await queue.drop()  # the demo's queue name is unique to this run
        await queue.close()


async def first_of(
    done: asyncio.Event, interrupted: asyncio.Event, running: asyncio.Task[Any]
) -> None:
    """Wait until all jobs are done or Ctrl-C; if the worker ends first, surface its error."""
    waiters = {asyncio.create_task(done.wait()), asyncio.create_task(interrupted.wait())}
    await asyncio.wait({*waiters, running}, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    if running.done():
        running.result()  # raises the worker's error
        raise click.ClickException("the demo worker stopped before all jobs were done")


def share_table(run: DemoRun) -> Table:
    served = sum(run.window.values())
    weight_total = sum(w for _, w in LANES)
    table = Table()
    for name in ("lane", "weight", "promised share", "claims", "measured share"):
        table.add_column(name, justify="left" if name == "lane" else "right")
    for group, weight in LANES:
        n = run.window.get(group, 0)
        table.add_row(group, str(weight), percent(weight, weight_total), str(n), percent(n, served))
    return table


def lane_label(group: str, weights: dict[str, int]) -> str:
    if group == CAPPED[0]:
        return f"{group} (cap {CAPPED[1]})"
    return f"{group} (w{weights[group]})"


def claims_table(claims: Sequence[Claim]) -> Table:
    weights = dict(LANES)
    table = Table()
    for name in ("#", "lane", "job", "tier", "counter", "score"):
        table.add_column(name, justify="left" if name in ("lane", "job") else "right")
    for i, c in enumerate(claims, 1):
        style = "bold" if c.tier == 0 else ""
        table.add_row(
            str(i),
            f"{c.group} (cap {CAPPED[1]})"
            if c.group == CAPPED[0]
            else f"{c.group} (w{weights[c.group]})",
            c.name,
            str(c.tier),
            str(c.counter),
            str(c.score),
            style=style,
        )
    return table


def counters_note(claims: Sequence[Claim]) -> list[str]:
    """Why the first claims show high counters: the alerts were added last, but
    their tier puts them first. Built from the claims themselves."""
    first = claims[0] if claims else None
    if first is None or first.tier != 0:
        return []
    report = next((c for c in claims if c.group == first.group and c.tier == 1), None)
    if report is None:
        return []
    return [
        f"Why alert {first.counter} comes before report {report.counter}: the counter is the "
        "order in which the server",
        f"accepted each job (one counter per queue). The alerts of {first.group}'s first "
        "batch were added after its",
        "reports, so their counters are higher; but an alert is tier 0, and "
        "score = tier × 2^32 + counter:",
        f"alert {first.counter} scores {first.score:,}, report {report.counter} scores "
        f"{report.score:,}.",
    ]


def print_report(run: DemoRun, elapsed: float, server: str, queue_name: str) -> None:
    """The two tables and what they show."""
    served = sum(run.window.values())
    lines = [
        "",
        f"Share of the first {served} claims, while all three lanes still had waiting jobs:",
        share_table(run),
        "While every lane has waiting jobs, the ring serves each lane up to its weight per "
        "turn, so each gets weight / Σ weights of the claims.",
        f"{CAPPED[0]} (concurrency {CAPPED[1]}): {run.capped_done} jobs, at most "
        f"{run.capped_most} running at once. While its job ran, the rotation passed it over "
        "(a turn with no claim)",
        "and it kept its place in the ring; the weighted lanes' shares are unchanged "
        "(echomq lane NAME --concurrency K).",
        "",
        f"The first {min(FIRST_CLAIMS, len(run.claims))} claims, in the order their "
        "handlers started:",
        *counters_note(run.claims),
        claims_table(run.claims[:FIRST_CLAIMS]),
        "Lanes take turns 3 : 2 : 1; within a lane, tier-0 alerts go before tier-1 reports "
        "added earlier,",
        "because the tier sits above the counter in the score (try: echomq score compare 0 "
        "200 1 1).",
        "",
        f"{run.per_lane * len(LANES)} jobs in {elapsed:.1f} s on the weighted lanes and "
        f"{run.capped_jobs} on {CAPPED[0]} ({run.total / elapsed:.0f} jobs/s) on {server}; "
        f"queue {queue_name} deleted.",
    ]
    if server.startswith("the embedded Valkey"):
        lines += [
            "",
            "The embedded Valkey keeps running for your next echomq command (with the "
            "jobs of your other queues): `echomq server stop` stops it.",
        ]
    for line in lines:
        if isinstance(line, str):
            console.print(line, markup=False)
        else:
            console.print(line)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--jobs",
    "-n",
    "total",
    type=click.IntRange(30, 1_000_000),
    default=1500,
    show_default=True,
    help="Jobs of the weighted lanes, split evenly over the three; the capped lane "
    "gets one more job per 30 (at least 3).",
)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(1, 1000),
    default=16,
    show_default=True,
    help="Jobs the demo worker runs at once.",
)
@click.option(
    "--work",
    type=click.FloatRange(0, 10),
    default=0.1,
    show_default=True,
    metavar="SECONDS",
    help="How long each job takes.",
)
@click.option(
    "--url",
    envvar="ECHOMQ_URL",
    show_envvar=True,
    metavar="URL",
    help="Server url; default: the embedded Valkey.",
)
def demo(total: int, concurrency: int, work: float, url: str | None) -> None:
    """Watch tiers and weighted lanes at work (weights 3 : 2 : 1).

    Runs on the embedded Valkey (no setup needed) for about 15 seconds, on a
    fresh queue that is deleted afterwards.

    \b
    Examples:
      echomq demo
      echomq demo --jobs 300 --work 0.01
    """
    queue_name = f"demo-{secrets.token_hex(4)}"
    lanes = ", ".join(f"{g} (weight {w})" for g, w in LANES)
    console.print(f"[bold]echomq demo[/] on queue {queue_name}: lanes {lanes}")
    console.print(
        f"Every fifth job is a tier-0 alert, the rest are tier-1 reports; "
        f"lane {CAPPED[0]} is capped at {CAPPED[1]} running job."
    )
    per_lane = total // len(LANES)
    capped_jobs = max(3, total // CAPPED_SHARE)
    run, elapsed, server = asyncio.run(
        run_demo(url, per_lane, concurrency, work, queue_name, capped_jobs)
    )
    print_report(run, elapsed, server, queue_name)

"""``echomq stats``, ``echomq lanes`` and ``echomq weight``: how a queue is doing.

``lanes`` puts each lane's measured share of claims next to the share its
weight promises, so an operator can see the weighted rotation working (or a
lane that is not backlogged and so takes less than its weight).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    fail,
    json_option,
    lane_label,
    open_queue,
    parse_group,
    percent,
    plain_table,
    queue_options,
    short_when,
    watch_options,
)
from echomq.cli.queues import note_if_unused
from echomq.cli.signals import stoppable
from echomq.keys import lane_of
from echomq.options import MAX_WEIGHT
from echomq.reports import LaneInfo, QueueStats
from echomq.sync import SyncQueue

_STATE_NOTES = {"failed": "retry pending", "active": "leased by a worker"}


class Rates:
    """Jobs per second added, completed and failed between two readings of the totals."""

    KINDS = ("added", "completed", "failed")

    def __init__(self) -> None:
        self._last: tuple[float, dict[str, int]] | None = None

    def update(self, stats: QueueStats) -> dict[str, float] | None:
        """The rates since the previous reading (None at the first)."""
        now = time.monotonic()
        last, self._last = self._last, (now, dict(stats.totals))
        if last is None:
            return None
        then, before = last
        span = max(now - then, 1e-6)
        return {k: (stats.totals.get(k, 0) - before.get(k, 0)) / span for k in self.KINDS}


def rates_text(rates: dict[str, float] | None) -> str:
    if rates is None:
        return "rates: measured from the next refresh on"
    return (
        f"rates: {rates['added']:.1f} added/s · {rates['completed']:.1f} completed/s · "
        f"{rates['failed']:.1f} failed attempts/s"
    )


def stats_view(stats: QueueStats, rates: Rates | None = None) -> list[str]:
    """Counts by state and waiting jobs by lane, as two tables (and rates, watching)."""
    mode = "paused" if stats.paused else "running"
    totals = stats.totals
    lines = [
        f"queue {stats.queue} · {stats.ordering or 'composite'} ordering · {mode} · "
        f"last activity {short_when(stats.last_activity)}",
        "",
        *plain_table(
            ("state", "jobs", ""),
            ((state, str(n), _STATE_NOTES.get(state, "")) for state, n in stats.counts.items()),
            right={1},
        ),
        "",
        f"since creation: {totals.get('added', 0)} added, "
        f"{totals.get('completed', 0)} completed, {totals.get('failed', 0)} failed attempts",
    ]
    if rates is not None:
        lines.append(rates_text(rates.update(stats)))
    lines += [
        "",
        f"waiting by lane ({stats.ring_length} in the ring):",
        *plain_table(
            ("lane", "waiting"),
            ((lane_label(g, markup=False), str(n)) for g, n in stats.lanes.items()),
            right={1},
        ),
    ]
    return lines


def print_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


#: on a terminal, a redraw moves the cursor home and clears the screen first.
_REDRAW = "\x1b[H\x1b[2J"


def _watch(render: Callable[[], list[str]], interval: float) -> None:
    """Print ``render()`` every ``interval`` seconds until Ctrl-C (in place on a terminal)."""
    redraw = sys.stdout.isatty()
    try:
        with stoppable():
            while True:
                lines = render()
                if redraw:
                    click.echo(_REDRAW, nl=False)
                print_lines(lines)
                if not redraw:
                    click.echo()
                time.sleep(interval)
    except KeyboardInterrupt:
        return


def _json_line(value: Any) -> None:
    click.echo(json.dumps(value, separators=(",", ":")), nl=True)


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
@watch_options
@queue_options
def stats(as_json: bool, watch: bool, interval: float, queue: str, url: str | None) -> None:
    """Counts of jobs per state and waiting jobs per lane.

    With --watch, also jobs added, completed and failed per second since the
    previous refresh; with --watch --json, one JSON object per line per
    refresh (with "rates").

    \b
    Examples:
      echomq stats -q mail
      echomq stats --json | jq .counts.waiting
      echomq stats --watch --interval 0.5
    """
    with open_queue(queue, url) as q:
        first = q.stats()
        note_if_unused(q, first)
        if as_json and watch:
            _watch_json(q, interval)
        elif as_json:
            echo_json(first.to_dict())
        elif watch:
            rates = Rates()
            _watch(lambda: stats_view(q.stats(), rates), interval)
        else:
            print_lines(stats_view(first))


def _watch_json(q: SyncQueue, interval: float) -> None:
    """One JSON object per line per refresh, with ``rates`` (jobs/s; null at first)."""
    rates = Rates()
    try:
        with stoppable():
            while True:
                stats = q.stats()
                _json_line({**stats.to_dict(), "rates": rates.update(stats)})
                time.sleep(interval)
    except KeyboardInterrupt:
        return


def lane_rows(lanes: list[LaneInfo]) -> list[dict[str, Any]]:
    """Each lane of the ring with its share of claims and the share its weight promises."""
    served_total = sum(lane.served for lane in lanes)
    weight_total = sum(lane.weight for lane in lanes)
    return [
        {
            "position": lane.position,
            "group": lane.group,
            "weight": lane.weight,
            "backlog": lane.backlog,
            "served": lane.served,
            "share": lane.served / served_total if served_total else None,
            "weight_share": lane.weight / weight_total if weight_total else None,
            "turn_left": lane.turn_left,
            **lane.controls(),
        }
        for lane in lanes
    ]


LANE_COLUMNS = (
    *("#", "lane", "weight", "backlog", "served", "share", "weight share", "turn left"),
    *("active/cap", "rate", "controls"),
)


def lanes_view(rows: list[dict[str, Any]], idle: dict[str | None, int]) -> list[str]:
    served_total = sum(r["served"] for r in rows)
    weight_total = sum(r["weight"] for r in rows)
    table = plain_table(
        LANE_COLUMNS,
        (
            (
                "–" if r["position"] < 0 else str(r["position"]),
                lane_label(r["group"], markup=False),
                str(r["weight"]),
                str(r["backlog"]),
                str(r["served"]),
                percent(r["served"], served_total),
                percent(r["weight"], weight_total),
                "" if r["turn_left"] is None else str(r["turn_left"]),
                f"{r['active']}/{'–' if r['concurrency'] is None else r['concurrency']}",
                "" if r["rate"] is None else f"{r['rate']['max']}/{r['rate']['per_seconds']:g}s",
                controls_text(r),
            )
            for r in rows
        ),
        right={0, 2, 3, 4, 5, 6, 7, 8},
    )
    lines = [
        "lanes in ring order (head first), then parked and idle lanes with controls (#: –):",
        *table,
        "served = claims since the lane joined the ring; share = served / Σ served; "
        "weight share = weight / Σ weights; parked = out of the ring until it can be served",
    ]
    if idle:
        idle_text = ", ".join(
            f"{lane_label(g, markup=False)} (weight {w})"
            for g, w in sorted(idle.items(), key=lambda item: lane_label(item[0]))
        )
        lines.append(f"idle lanes with a weight set: {idle_text}")
    return lines


def controls_text(row: dict[str, Any]) -> str:
    words = []
    if row["paused"]:
        words.append("paused")
    if row["parked"]:
        words.append("parked")
    if row["throttled_until"]:
        words.append(f"throttled until {row['throttled_until']}")
    if row["max_waiting"] is not None:
        words.append(f"max_waiting {row['max_waiting']}")
    return ", ".join(words)


def _lanes_snapshot(q: SyncQueue, limit: int) -> tuple[list[dict[str, Any]], dict[str | None, int]]:
    rows = lane_rows(q.lanes(limit))
    in_ring = {r["group"] for r in rows}
    idle = {g: w for g, w in q.weights().items() if g not in in_ring}
    return rows, idle


@click.command(context_settings=CONTEXT_SETTINGS)
@json_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Most lanes to list.",
)
@watch_options
@queue_options
def lanes(
    as_json: bool, limit: int, watch: bool, interval: float, queue: str, url: str | None
) -> None:
    """Lanes in ring order: weight, backlog, claims, share.

    Each lane's claims served since it joined the ring, its share of all
    claims, and the share its weight promises.

    \b
    Examples:
      echomq lanes -q mail
      echomq lanes --json | jq '.lanes[] | {group, share, weight_share}'
    """
    with open_queue(queue, url) as q:
        note_if_unused(q)
        if as_json:
            rows, idle = _lanes_snapshot(q, limit)
            echo_json(
                {
                    "queue": queue,
                    "lanes": rows,
                    "idle_weights": {("" if g is None else g): w for g, w in idle.items()},
                }
            )
        elif watch:
            _watch(lambda: lanes_view(*_lanes_snapshot(q, limit)), interval)
        else:
            print_lines(lanes_view(*_lanes_snapshot(q, limit)))


def parse_weight(text: str) -> int:
    """A WEIGHT argument as an int in 1 … 1000; anything else is a user error (exit 1)."""
    try:
        value = int(text)
    except ValueError:
        fail(f"weight {text!r} is not an integer; allowed 1 … {MAX_WEIGHT}")
    return value  # the range is checked by the queue (InvalidWeight)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("group")
@click.argument("new_weight", metavar="[WEIGHT]", required=False)
@queue_options
def weight(group: str, new_weight: str | None, queue: str, url: str | None) -> None:
    """Set or show a lane's weight (1 … 1000).

    WEIGHT is how many claims GROUP's lane gets per turn; without WEIGHT the
    current weight is printed.

    GROUP "" (or "(default)") is the default lane. A new weight takes effect
    at the lane's next turn.

    \b
    Examples:
      echomq weight acme 3
      echomq weight acme          # prints 3
      echomq weight "" 2          # the default lane
    """
    lane = parse_group(group)
    lane_of(lane)  # a bad group name is refused before connecting
    with open_queue(queue, url) as q:
        if new_weight is None:
            click.echo(str(q.weights().get(lane, 1)))
            return
        value = parse_weight(new_weight)
        q.set_weight(lane, value)
    click.echo(f"weight of lane {lane_label(lane)} in queue {queue}: {value}")

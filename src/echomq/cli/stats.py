"""``echomq stats``, ``echomq lanes`` and ``echomq weight``: how a queue is doing.

``lanes`` puts each lane's measured share of claims next to the share its
weight promises, so an operator can see the weighted rotation working (or a
lane that is not backlogged and so takes less than its weight).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    console,
    echo_json,
    fail,
    json_option,
    lane_label,
    open_queue,
    parse_group,
    percent,
    queue_options,
    watch_options,
)
from echomq.keys import lane_of
from echomq.options import MAX_WEIGHT
from echomq.reports import LaneInfo, QueueStats
from echomq.sync import SyncQueue

_STATE_NOTES = {"failed": "retry pending", "active": "leased by a worker"}


def stats_view(stats: QueueStats) -> RenderableType:
    """Counts by state and waiting jobs by lane, as two tables."""
    mode = "paused" if stats.paused else "running"
    counts = Table()
    counts.add_column("state")
    counts.add_column("jobs", justify="right")
    counts.add_column("")
    for state, n in stats.counts.items():
        counts.add_row(state, str(n), _STATE_NOTES.get(state, ""))
    totals = stats.totals
    lanes = Table()
    lanes.add_column("lane")
    lanes.add_column("waiting", justify="right")
    for group, n in stats.lanes.items():
        lanes.add_row(lane_label(group), str(n))
    return Group(
        Text(f"queue {stats.queue} · {stats.ordering or 'composite'} ordering · {mode}"),
        counts,
        Text(
            f"since creation: {totals.get('added', 0)} added, "
            f"{totals.get('completed', 0)} completed, {totals.get('failed', 0)} failed attempts"
        ),
        Text(f"waiting by lane ({stats.ring_length} in the ring):"),
        lanes,
    )


def _watch(render: Callable[[], RenderableType], interval: float) -> None:
    """Redraw ``render()`` every ``interval`` seconds until Ctrl-C (in place on a terminal)."""
    try:
        if console.is_terminal:
            with Live(render(), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(), refresh=True)
        while True:
            console.print(render())
            console.print()
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

    With --watch --json, prints one JSON object per line per refresh.

    \b
    Examples:
      echomq stats -q mail
      echomq stats --json | jq .counts.waiting
      echomq stats --watch --interval 0.5
    """
    with open_queue(queue, url) as q:
        if as_json and watch:
            try:
                while True:
                    _json_line(q.stats().to_dict())
                    time.sleep(interval)
            except KeyboardInterrupt:
                return
        if as_json:
            echo_json(q.stats().to_dict())
        elif watch:
            _watch(lambda: stats_view(q.stats()), interval)
        else:
            console.print(stats_view(q.stats()))


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
        }
        for lane in lanes
    ]


def lanes_view(rows: list[dict[str, Any]], idle: dict[str | None, int]) -> RenderableType:
    table = Table()
    for name, justify in (
        ("#", "right"),
        ("lane", "left"),
        ("weight", "right"),
        ("backlog", "right"),
        ("served", "right"),
        ("share", "right"),
        ("weight share", "right"),
        ("turn left", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    served_total = sum(r["served"] for r in rows)
    weight_total = sum(r["weight"] for r in rows)
    for r in rows:
        table.add_row(
            str(r["position"]),
            lane_label(r["group"]),
            str(r["weight"]),
            str(r["backlog"]),
            str(r["served"]),
            percent(r["served"], served_total),
            percent(r["weight"], weight_total),
            "" if r["turn_left"] is None else str(r["turn_left"]),
        )
    parts: list[RenderableType] = [
        Text("lanes in ring order (head first):"),
        table,
        Text(
            "served = claims since the lane joined the ring; share = served / Σ served; "
            "weight share = weight / Σ weights"
        ),
    ]
    if idle:
        idle_text = ", ".join(
            f"{lane_label(g)} (weight {w})"
            for g, w in sorted(idle.items(), key=lambda item: lane_label(item[0]))
        )
        parts.append(Text(f"idle lanes with a weight set: {idle_text}"))
    return Group(*parts)


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
            console.print(lanes_view(*_lanes_snapshot(q, limit)))


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

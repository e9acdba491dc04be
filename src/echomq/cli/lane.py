"""``echomq lane GROUP``: show or change one lane's controls (docs/ordering.md
"Lane controls")."""

from __future__ import annotations

from typing import Any

import click

from echomq.cli.common import (
    CONTEXT_SETTINGS,
    echo_json,
    escape_text,
    fail,
    lane_label,
    open_queue,
    parse_group,
    queue_options,
)
from echomq.errors import InvalidOption
from echomq.keys import lane_of
from echomq.lanecontrols import RATE_FORMAT, UNSET, parse_rate_text
from echomq.reports import LaneInfo


def parse_limit(text: str | None, what: str) -> Any:
    """An integer limit, ``none`` (remove it) or, not given, UNSET (leave it)."""
    if text is None:
        return UNSET
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        fail(f"{what} {text!r} is not an integer (or 'none' to remove it)")


def parse_rate(text: str | None) -> Any:
    """``100/1s``, ``5/200ms``, ``1000/m`` → (max, per_seconds); ``none`` removes it."""
    if text is None:
        return UNSET
    if text.lower() == "none":
        return None
    try:
        return parse_rate_text(text)
    except InvalidOption as exc:
        fail(f"--rate: {exc} (or 'none' to remove it)")


def describe(info: LaneInfo | None) -> dict[str, Any]:
    if info is None:
        return {"weight": 1, "concurrency": None, "rate": None, "paused": False}
    return {
        "weight": info.weight,
        "backlog": info.backlog,
        **info.controls(),
    }


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("group")
@click.option("--weight", "weight", default=None, help="Claims per turn, 1 … 1000.")
@click.option("--concurrency", default=None, help="Most active jobs at once ('none' removes).")
@click.option("--rate", default=None, help=f"Most claims per window: {RATE_FORMAT} ('none').")
@click.option("--pause/--resume", "paused", default=None, help="Stop or resume serving it.")
@click.option("--max-waiting", default=None, help="Most waiting + delayed jobs ('none').")
@click.option(
    "--unthrottle",
    is_flag=True,
    help="Lift a throttle in force (throttle() / RateLimited) now; wakes an idle worker.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the lane as JSON.")
@queue_options
def lane(
    group: str,
    weight: str | None,
    concurrency: str | None,
    rate: str | None,
    paused: bool | None,
    max_waiting: str | None,
    unthrottle: bool,
    as_json: bool,
    queue: str,
    url: str | None,
) -> None:
    """Show or change one lane's controls.

    Without options the lane's weight, cap, rate, pause, max_waiting and
    throttle are printed. GROUP "" (or "(default)") is the default lane.

    \b
    Examples:
      echomq lane acme --concurrency 5 --rate 100/1s
      echomq lane acme --pause
      echomq lane acme --unthrottle
      echomq lane acme --max-waiting 10000 --concurrency none
    """
    name = parse_group(group)
    lane_of(name)  # a bad group name is refused before connecting
    changes = {
        "weight": parse_limit(weight, "weight"),
        "concurrency": parse_limit(concurrency, "concurrency"),
        "rate": parse_rate(rate),
        "paused": UNSET if paused is None else paused,
        "max_waiting": parse_limit(max_waiting, "max-waiting"),
        "throttle": None if unthrottle else UNSET,
    }
    with open_queue(queue, url) as q:
        if any(v is not UNSET for v in changes.values()):
            q.set_lane(name, **changes)
        info = next((x for x in q.lanes(limit=100_000) if x.group == name), None)
    shown = describe(info)
    if as_json:
        echo_json({"queue": queue, "group": name, **shown})
        return
    click.echo(f"lane {lane_label(name)} of queue {escape_text(queue)}:")
    for key, value in shown.items():
        click.echo(f"  {key}: {escape_text('' if value is None else str(value))}")

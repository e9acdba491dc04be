"""What is served: the lanes' controls (set_lane, throttle, set_weight), reading
the lanes (lanes, weights, waiting_tiers), and pausing the whole queue."""

from __future__ import annotations

from typing import Any, NamedTuple

from echomq import lanepages
from echomq.call import Call
from echomq.engine.base import EngineBase
from echomq.engine.replies import nothing, pairs
from echomq.errors import InvalidOption
from echomq.keys import group_of, lane_of
from echomq.lanecontrols import UNSET, Unset, check_throttle, encode_controls
from echomq.options import check_int, check_weight
from echomq.reports import LaneInfo, TierCounts
from echomq.steps import Next

#: pauseQueue.lua's argument: pause, or serve again.
PAUSE, RESUME = "1", "0"


class LaneTiers(NamedTuple):
    """One lane of waitingTiers.lua's reply: {lane, {tier, count, …}, more}."""

    lane: str
    tiers: list[Any]
    more: str


def decode_weights(reply: Any) -> dict[str | None, int]:
    """The weights hash: lane → claims per turn."""
    return {group_of(k): int(v) for k, v in pairs(reply).items()}


def decode_waiting_tiers(reply: Any) -> dict[str | None, TierCounts]:
    width = len(LaneTiers._fields)
    out: dict[str | None, TierCounts] = {}
    for i in range(0, len(reply), width):
        lane = LaneTiers(*reply[i : i + width])
        flat = lane.tiers
        counts = {int(flat[j]): int(flat[j + 1]) for j in range(0, len(flat), 2)}
        out[group_of(lane.lane)] = TierCounts(counts, bool(int(lane.more)))
    return out


class LaneCalls(EngineBase):
    """The lanes' controls and weights, reading the lanes, pausing the queue."""

    def set_lane(
        self,
        group: str | None,
        *,
        weight: int | Unset | None = UNSET,
        concurrency: int | Unset | None = UNSET,
        rate: tuple[int, float] | Unset | None = UNSET,
        paused: bool | Unset = UNSET,
        max_waiting: int | Unset | None = UNSET,
        throttle: float | Unset | None = UNSET,
    ) -> Call[None]:
        """Change one lane's controls (docs/ordering.md "Lane controls"): an omitted
        argument is left as it is, ``None`` removes that control. ``concurrency=k``:
        at most k jobs of the lane active at once; ``rate=(max, per_seconds)``: at
        most max claims start in any window of per_seconds; ``paused``: not served;
        ``max_waiting=n``: adds that would make the lane hold more than n waiting +
        delayed jobs raise LaneFull; ``throttle=None`` lifts a throttle in force
        (``throttle()`` / ``RateLimited``) at once and wakes an idle worker
        (``throttle=seconds`` is ``throttle(group, seconds)``). Records the event
        ``lane_changed`` (setLane.lua)."""
        lane = lane_of(group)
        pairs = encode_controls(
            weight=weight,
            concurrency=concurrency,
            rate=rate,
            paused=paused,
            max_waiting=max_waiting,
            throttle=throttle,
        )
        if not pairs:
            raise InvalidOption(
                "set_lane needs one of weight, concurrency, rate, paused, max_waiting, throttle"
            )
        return self._script("setLane", nothing, lane, *pairs)

    def throttle(self, group: str | None, seconds: float) -> Call[None]:
        """Do not serve ``group``'s lane for ``seconds`` from now (server clock); a
        throttle never shortens one already in force."""
        lane = lane_of(group)
        return self._script("setLane", nothing, lane, "t", str(check_throttle(seconds)))

    def set_weight(self, group: str | None, weight: int) -> Call[None]:
        """Claims per turn for ``group``'s lane (1 … 1000); takes effect at its next
        turn. Records the event ``lane_changed`` (setLane.lua)."""
        lane = lane_of(group)
        return self._script("setLane", nothing, lane, "w", str(check_weight(weight)))

    def weights(self) -> Call[dict[str | None, int]]:
        """Every weight that was set, by group (an unset weight is 1)."""
        return Call(parse=decode_weights, command=("HGETALL", self.keys.weights))

    def lanes(self, limit: int = 1000) -> Call[list[LaneInfo] | Next[list[LaneInfo]]]:
        """The lanes in ring order with weight, backlog, claims served, the turn left
        and their controls, then the parked lanes and the lanes with controls that
        hold no waiting job (position -1); at most ``limit``, read in pages of
        bounded server work (echomq.lanepages)."""
        check_int("limit", limit, 1, 1_000_000)
        return lanepages.LanePages(self._script, "all", limit, list).call()

    def waiting_tiers(
        self, lane_limit: int = 100, tier_limit: int = 32
    ) -> Call[dict[str | None, TierCounts]]:
        """Waiting jobs per lane (ring order) and tier, lowest tiers first."""
        check_int("lane_limit", lane_limit, 1, 10_000)
        check_int("tier_limit", tier_limit, 1, 1_000)
        return self._script("waitingTiers", decode_waiting_tiers, str(lane_limit), str(tier_limit))

    # -- the whole queue -----------------------------------------------------
    def pause(self) -> Call[None]:
        """Stop serving claims from this queue (adds still succeed); records the
        event ``paused`` (pauseQueue.lua)."""
        return self._script("pauseQueue", nothing, PAUSE)

    def resume(self) -> Call[None]:
        """Serve claims again after ``pause``: records the event ``resumed`` and
        rings the doorbell, so an idle worker claims at once (pauseQueue.lua)."""
        return self._script("pauseQueue", nothing, RESUME)

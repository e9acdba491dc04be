"""``echomq score``: the composite-score codec, drawn as a bit ruler.

Why a command for a formula: the order theorem rests on ``tier × 2^32 +
counter``, and seeing the tier in bits 32–52 and the counter in bits 0–31 is
the quickest way to understand why any tier difference beats every counter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from echomq import score as codec
from echomq.cli.common import CONTEXT_SETTINGS, echo_json, fail, json_option

_TIER_WIDTH = codec.TIER_BITS
_COUNTER_WIDTH = codec.COUNTER_BITS


def hex_split(decoded: codec.Decoded) -> str:
    """The score in hex with ``_`` at bit 32: the tier left of it, the counter right."""
    return f"0x{decoded.tier:X}_{decoded.counter:08X}"


def _bracket(label: str, width: int) -> str:
    """``└──── label ────┘`` spanning ``width`` characters."""
    inner = f" {label} ".center(width - 2, "─")
    return f"└{inner}┘"


def ruler(decoded: codec.Decoded) -> list[str]:
    """The score's 53 bits with the bit numbers above and the field names below."""
    tier_hi, tier_lo = decoded.tier_bits[1], decoded.tier_bits[0]
    counter_hi, counter_lo = decoded.counter_bits[1], decoded.counter_bits[0]
    numbers = (
        f"{tier_hi:<{_TIER_WIDTH - 2}}{tier_lo:>2} "
        f"{counter_hi:<{_COUNTER_WIDTH - 2}}{counter_lo:>2}"
    )
    bits = f"{decoded.tier:0{_TIER_WIDTH}b} {decoded.counter:0{_COUNTER_WIDTH}b}"
    names = (
        f"{_bracket(f'tier {decoded.tier}', _TIER_WIDTH)} "
        f"{_bracket(f'counter {decoded.counter}', _COUNTER_WIDTH)}"
    )
    return [numbers, bits, names]


def readout(decoded: codec.Decoded) -> list[str]:
    """The full readout: score in decimal and hex, both fields with their bit ranges, ruler."""
    lo, hi = decoded.tier_bits
    clo, chi = decoded.counter_bits
    return [
        f"score    {decoded.score}",
        f"hex      {hex_split(decoded)}   (tier | counter, split at bit {lo})",
        f"tier     {decoded.tier:<12} bits {lo}–{hi}  (priority: lower is served first)",
        f"counter  {decoded.counter:<12} bits {clo}–{chi}   (arrival order within the tier)",
        "",
        *(f"  {line}" for line in ruler(decoded)),
    ]


def decoded_dict(decoded: codec.Decoded) -> dict[str, Any]:
    return {
        "score": decoded.score,
        "hex": hex_split(decoded),
        "tier": decoded.tier,
        "counter": decoded.counter,
        "tier_bits": list(decoded.tier_bits),
        "counter_bits": list(decoded.counter_bits),
    }


def parse_score(text: str) -> int:
    """A score in decimal or ``0x`` hex (``_`` separators allowed, as printed)."""
    try:
        return int(text.strip(), 0)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            fail(f"score {text!r} is not a number; allowed 0 … {codec.MAX_SCORE} or 0x… hex")
        if not value.is_integer():
            fail(f"score {text!r} is not a whole number; allowed 0 … {codec.MAX_SCORE}")
        return int(value)


def _print(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


@click.group(context_settings=CONTEXT_SETTINGS)
def score() -> None:
    """Encode, decode, compare scores (tier × 2^32 + counter); explain aged keys.

    \b
    Examples:
      echomq score encode 2 7
      echomq score decode 8589934599
      echomq score compare 1 999 2 1
      echomq score aged 1796455222747 2 --age-step 0.5
    """


@score.command(context_settings=CONTEXT_SETTINGS)
@click.argument("tier", type=int)
@click.argument("counter", type=int)
@json_option
def encode(tier: int, counter: int, as_json: bool) -> None:
    """Pack TIER (0 … 2^21−1) and COUNTER (0 … 2^32−1) into a score.

    \b
    Example:
      echomq score encode 2 7        # → 8589934599 = 0x2_00000007
    """
    decoded = codec.decode(codec.encode(tier, counter))
    if as_json:
        echo_json(decoded_dict(decoded))
    else:
        _print(readout(decoded))


@score.command(context_settings=CONTEXT_SETTINGS)
@click.argument("value", metavar="SCORE")
@json_option
def decode(value: str, as_json: bool) -> None:
    """Split SCORE (decimal or 0x hex) into its tier and counter.

    \b
    Examples:
      echomq score decode 8589934599
      echomq score decode 0x2_00000007
    """
    decoded = codec.decode(parse_score(value))
    if as_json:
        echo_json(decoded_dict(decoded))
    else:
        _print(readout(decoded))


def verdict(a: codec.Decoded, b: codec.Decoded) -> list[str]:
    """Which of two waiting jobs in one lane is claimed first, and why."""
    if a.score == b.score:
        return [
            "Equal scores: the lane orders them by member, i.e. by job id (mint order).",
            "(With composite ordering every waiting job has its own counter, so this "
            "only happens with ordering='mint'.)",
        ]
    first, second, label = (a, b, "A") if a.score < b.score else (b, a, "B")
    if first.tier != second.tier:
        why = [
            f"Job {label} pops first: tier {first.tier} < tier {second.tier}.",
            f"The tier dominates the counter: one tier step (2^32 = {1 << 32:,}) exceeds every "
            f"counter (at most {codec.MAX_COUNTER:,}), so counters {first.counter:,} vs "
            f"{second.counter:,} cannot change the order.",
        ]
    else:
        why = [
            f"Job {label} pops first: same tier {first.tier}, and counter {first.counter:,} < "
            f"{second.counter:,}: it arrived earlier.",
        ]
    return [*why, "(Within one lane; across lanes the weighted ring decides whose turn it is.)"]


@score.command(context_settings=CONTEXT_SETTINGS)
@click.argument("tier1", type=int)
@click.argument("counter1", type=int)
@click.argument("tier2", type=int)
@click.argument("counter2", type=int)
@json_option
def compare(tier1: int, counter1: int, tier2: int, counter2: int, as_json: bool) -> None:
    """Say which of job A (TIER1, COUNTER1) and job B (TIER2, COUNTER2) pops first.

    \b
    Example:
      echomq score compare 1 999 2 1   # A: tier 1 beats tier 2 despite counter 999 > 1
    """
    a = codec.decode(codec.encode(tier1, counter1))
    b = codec.decode(codec.encode(tier2, counter2))
    lines = verdict(a, b)
    if as_json:
        first = None if a.score == b.score else ("A" if a.score < b.score else "B")
        echo_json(
            {"a": decoded_dict(a), "b": decoded_dict(b), "first": first, "reason": " ".join(lines)}
        )
        return
    _print(
        [
            f"A  tier {a.tier:<8} counter {a.counter:<11} score {a.score:<17} {hex_split(a)}",
            f"B  tier {b.tier:<8} counter {b.counter:<11} score {b.score:<17} {hex_split(b)}",
            "",
            *lines,
        ]
    )


def aged_readout(parts: codec.AgedKey) -> list[str]:
    """What an aged key says: when the job became due, and whom it is served before."""
    step_s = parts.age_step_ms / 1000
    due = datetime.fromtimestamp(parts.due_ms / 1000, UTC)
    passes = datetime.fromtimestamp(parts.key / 1000, UTC)
    return [
        f"key       {parts.key}   (ms: due time + tier × age_step)",
        f"due       {parts.due_ms}   = {due.isoformat(timespec='milliseconds')}",
        f"tier      {parts.tier} × age_step {step_s:g} s = {parts.tier_part_ms} ms",
        "",
        f"It is served after every job of its lane whose key is lower, before every one whose "
        f"key is higher (equal keys: by job id). So it goes before every tier-0 job that "
        f"became due after {passes.isoformat(timespec='milliseconds')} "
        f"({parts.tier} × {step_s:g} s after it did): no stream of more urgent work holds it "
        f"longer than that.",
        "(Within one lane; across lanes the weighted ring decides whose turn it is.)",
    ]


@score.command(context_settings=CONTEXT_SETTINGS)
@click.argument("key", metavar="KEY")
@click.argument("tier", type=int)
@click.option(
    "--age-step",
    type=float,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="The queue's age_step (echomq config shows it).",
)
@json_option
def aged(key: str, tier: int, age_step: float, as_json: bool) -> None:
    """Explain KEY, the lane key of a job of TIER in an ordering="aged" queue.

    An aged key is the job's due time in ms plus TIER × age_step: a tier-t job
    is served before every tier-0 job that became due more than t × age_step
    after it.

    \b
    Examples:
      echomq score aged 1796455222747 2 --age-step 0.5
      echomq score aged 1796455222747 2 --age-step 0.5 --json
    """
    from echomq.errors import InvalidOption
    from echomq.settings import check_age_step

    try:
        step_ms = check_age_step(age_step)
    except InvalidOption as exc:
        fail(str(exc))
    parts = codec.aged_decode(parse_score(key), tier, step_ms)
    if as_json:
        echo_json(
            {
                "key": parts.key,
                "tier": parts.tier,
                "age_step_ms": parts.age_step_ms,
                "due_ms": parts.due_ms,
                "passes_tier0_due_after_ms": parts.key,
            }
        )
    else:
        _print(aged_readout(parts))

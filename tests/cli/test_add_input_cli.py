"""``echomq add --data`` with hostile JSON (issue 14, row 6): one line, exit 1, nothing added."""

from __future__ import annotations

import pytest

from cli.clitools import RunCli, one_line_error
from echomq import SyncQueue


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested too deeply to read; payloads allow at most 254"),
        ("[" * 300 + "]" * 300, "nested deeper than 254 levels"),
        ('{"x": NaN}', "JSON cannot carry; allowed: finite numbers only"),
        ("[Infinity]", "JSON cannot carry; allowed: finite numbers only"),
    ],
    ids=["10000-deep", "300-deep", "nan", "infinity"],
)
def test_hostile_data_is_one_line_and_adds_nothing(
    cli: RunCli, sq: SyncQueue, data: str, message: str
) -> None:
    line = one_line_error(cli("add", "job", "--data", "-", stdin=data))
    assert message in line
    assert sq.stats().totals.get("added", 0) == 0

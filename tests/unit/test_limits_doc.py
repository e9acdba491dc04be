"""The limit table in docs/lifecycle.md is the one options.py enforces (printed by
``python -m echomq.options``), so the docs cannot drift from the code."""

from __future__ import annotations

from pathlib import Path

from echomq.options import limits_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"


def test_the_limit_table_in_the_docs_is_the_one_enforced() -> None:
    assert limits_table() in DOCS.read_text(encoding="utf-8"), (
        "docs/lifecycle.md is out of date: paste the output of `python -m echomq.options`"
    )

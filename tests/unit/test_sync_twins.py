"""The blocking twins that tools/unasync.py writes from their asyncio originals are
what is committed: a fix written on one side only fails here (no server needed).

Fix a failure with ``python tools/unasync.py`` after editing the asyncio original.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: modules whose blocking twins are generated (each must keep at least one region)
TWINNED = [
    "src/echomq/sending/scripts.py",
    "src/echomq/sending/pipelines.py",
    "src/echomq/sending/durable.py",
    "src/echomq/sending/eviction.py",
    "src/echomq/sending/sender.py",
    "src/echomq/shell.py",
    "src/echomq/flows/events.py",
    "src/echomq/flows/waiters.py",
]


def load_unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", ROOT / "tools" / "unasync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("unasync", module)
    spec.loader.exec_module(module)
    return module


unasync = load_unasync()


def test_the_twinned_modules_hold_generated_regions() -> None:
    found = {str(path.relative_to(ROOT)) for path in unasync.modules()}
    assert set(TWINNED) <= found


@pytest.mark.parametrize("name", TWINNED)
def test_committed_blocking_twins_are_what_the_asyncio_originals_generate(name: str) -> None:
    path = ROOT / name
    text = path.read_text()
    assert unasync.generate(text, path) == text, (
        f"{name}: a blocking twin drifted from its asyncio original;"
        " edit the original, then run `python tools/unasync.py`"
    )


def test_a_hand_edit_of_a_twin_is_undone_and_an_edit_of_the_original_carried_over() -> None:
    path = ROOT / "src/echomq/sending/scripts.py"
    text = path.read_text()
    twin = "    replies = execute(_wired(calls, form))\n"
    assert text.count(twin) == 1
    hand_edited = text.replace(twin, twin + "    replies = replies[:]\n")
    assert unasync.generate(hand_edited, path) == text
    original = "    replies = await execute(_wired(calls, form))\n"
    edited = text.replace(original, original + "    replies = replies[:]\n")
    assert unasync.generate(edited, path).count("    replies = replies[:]\n") == 2


def test_tokens_are_replaced_as_the_blocking_side_needs() -> None:
    line = "        async with self._connection() as client:  # x"
    assert unasync.unasync_line(line) == "        with self._connection() as client:  # x"
    assert unasync.unasync_line("await asyncio.sleep(d)") == "time.sleep(d)"
    assert (
        unasync.unasync_line("x: redis.asyncio.cluster.RedisCluster = await f_async(AsyncClient)")
        == "x: redis.cluster.RedisCluster = f(SyncClient)"
    )
    assert unasync.unasync_line("-> Coroutine[Any, Any, T]:") == "-> T:"

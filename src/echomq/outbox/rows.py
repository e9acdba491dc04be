"""An outbox row's contents, with no database: the options stored as JSON text,
checked when the row is written, and the job they become when it is relayed.

Every ``add`` option travels with the row (``delay``, ``run_at``,
``priority``, ``group``, ``key``, ``max_attempts``, ``expires``, ``headers``,
``depends_on``, ``on_dependency_failure``, ``tags``, ``durable``). They are
checked when the row is written, by the very code ``add`` checks them with
(``Engine.new_job``), so a bad option fails the caller's own statement.
``delay`` and ``expires`` count from the moment the relay adds the job
(normally milliseconds after the commit); ``run_at`` is a moment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import orjson

from echomq.engine import ADD_OPTION_KEYS, Engine, JobOptions, NewJob
from echomq.errors import InvalidOption
from echomq.options import QueueOptions, check_known

#: add.lua's job array: element 3 (index 2) is the encoded payload (engine.jobs.new_job).
PAYLOAD_INDEX = 2
#: engines kept for checking rows, one per queue name (a bounded cache).
MAX_ENGINES = 1024


@dataclass(frozen=True, slots=True)
class RowValues:
    """What one outbox row holds besides its id: checked and encoded."""

    queue: str
    name: str
    data: str  # the payload as JSON text (as add stores it)
    options: str  # the add options as JSON text ("" for none)


def row_key(table: str, row_id: int) -> str:
    """The idempotency key of a row's job: a second add of the row finds the first job."""
    return f"outbox:{table}:{row_id}"


def encode_options(options: Mapping[str, Any]) -> str:
    """The options as JSON text (``run_at`` as an ISO 8601 moment), "" for none."""
    if not options:
        return ""
    stored = dict(options)
    run_at = stored.get("run_at")
    if isinstance(run_at, datetime):
        stored["run_at"] = run_at.isoformat()
    try:
        return orjson.dumps(stored, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError as exc:
        raise InvalidOption(f"add options cannot be stored as JSON: {exc}") from None


def decode_options(text: str) -> dict[str, Any]:
    """The options a row stored (InvalidOption if they are not a JSON object)."""
    if not text:
        return {}
    try:
        options = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidOption(f"stored options {text[:80]!r} are not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise InvalidOption(f"stored options {text[:80]!r} are not a JSON object")
    run_at = options.get("run_at")
    if isinstance(run_at, str):
        try:
            options["run_at"] = datetime.fromisoformat(run_at)
        except ValueError:
            raise InvalidOption(
                f"stored run_at {run_at[:40]!r} is not an ISO 8601 moment"
            ) from None
    return options


class RowChecker:
    """Checks rows with each queue's engine (its name and default options): the
    same checks ``add`` makes, so a row that passes becomes a job unless the
    queue itself refuses it (a dead dependency, a newer stored format)."""

    def __init__(self, settings: QueueOptions | None = None) -> None:
        self._settings = settings or QueueOptions()
        self._engines: dict[str, Engine] = {}

    def engine(self, queue: str) -> Engine:
        engine = self._engines.get(queue)
        if engine is None:
            if len(self._engines) >= MAX_ENGINES:
                self._engines.clear()
            engine = self._engines[queue] = Engine(queue, self._settings)
        return engine

    def check(self, queue: str, name: str, data: Any, options: Mapping[str, Any]) -> RowValues:
        """The row to write for ``add(name, data, **options)`` on ``queue``; raises
        the error ``add`` would raise (an InvalidInput), writing nothing."""
        check_known("add", options, ADD_OPTION_KEYS)
        durable = options.get("durable")
        if durable is not None and not isinstance(durable, bool):
            raise InvalidOption(f"durable {durable!r} is not a bool; allowed True, False or None")
        job_options = {k: v for k, v in options.items() if k != "durable"}
        job = self.engine(queue).new_job(name, data, **_job_options(job_options))
        return RowValues(queue, name, str(job.values[PAYLOAD_INDEX]), encode_options(options))

    def job(
        self,
        table: str,
        row_id: int,
        queue: str,
        name: str,
        data: str,
        options: str,
        job_id: str | None = None,
    ) -> tuple[NewJob, bool]:
        """The job a stored row becomes (its own key, or the row's), and whether
        it asked for a durable add; raises InvalidInput for a row refused for good."""
        stored = decode_options(options)
        check_known("stored", stored, ADD_OPTION_KEYS)
        durable = bool(stored.pop("durable", False))
        if stored.get("key") is None:
            stored["key"] = row_key(table, row_id)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InvalidOption(f"stored data is not JSON: {exc}") from None
        job = self.engine(queue).new_job(name, value, job_id=job_id, **_job_options(stored))
        return job, durable


def _job_options(options: Mapping[str, Any]) -> JobOptions:
    return cast(JobOptions, dict(options))

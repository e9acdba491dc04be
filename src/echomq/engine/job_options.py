"""The options of one job to add: ``add``'s keywords, an ``add_many`` item's keys,
and a task's defaults (``Engine.task_defaults``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal, TypedDict

from echomq.dedupe import Dedupe


class JobOptions(TypedDict, total=False):
    """The options of one job to add (``add``'s keywords, an ``add_many`` item's keys)."""

    priority: int
    group: str | None
    delay: float | None
    run_at: datetime | None
    max_attempts: int | None
    key: str | None
    expires: float | None
    headers: Mapping[str, str] | None
    depends_on: Sequence[str] | None
    on_dependency_failure: Literal["dead", "run"] | None
    tags: Mapping[str, str] | None
    dedupe: Dedupe | None
    batch: str | None


class AddOptions(JobOptions, total=False):
    """``add``'s keywords: a job's options, and whether to wait for a replica."""

    durable: bool | None


#: the keywords ``add`` takes besides name and data (any other is refused).
JOB_OPTION_KEYS = frozenset(JobOptions.__annotations__)
#: ``add``'s keywords (a job's options and ``durable``).
ADD_OPTION_KEYS = frozenset(AddOptions.__annotations__)
#: the keys an ``add_many`` item may have.
ITEM_KEYS = frozenset({"name", "data", *JOB_OPTION_KEYS})

"""Dependencies' calls: what a job depends on (checked and encoded for add.lua),
the results of its dependencies, and the jobs that depend on it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import orjson

from echomq import ids
from echomq.batches import is_batch_id
from echomq.call import Call
from echomq.engine.base import EngineBase, find, no_such_job
from echomq.engine.replies import is_code
from echomq.errors import E_NOT_FOUND, DependencyFailed, EchoMQError, InvalidDependency
from echomq.job import State, decode_payload
from echomq.options import check_int
from echomq.reports import Dependents

#: the most jobs one job may depend on.
MAX_DEPENDENCIES = 1000
#: ids of its dependents ``dependents()`` returns by default, and at most.
DEPENDENTS_SHOWN = 20
MAX_DEPENDENTS_SHOWN = 1000


def encode_dependencies(depends_on: object, job_id: str) -> str:
    """``depends_on`` checked (job ids or batch ids, at most MAX_DEPENDENCIES, not
    the job itself) and encoded as add.lua's JSON array text, duplicates dropped.
    A batch id means: once that batch has succeeded (echomq.batches)."""
    if isinstance(depends_on, str) or not isinstance(depends_on, Sequence):
        raise InvalidDependency(f"depends_on {depends_on!r:.200} must be a list of job ids")
    if not 1 <= len(depends_on) <= MAX_DEPENDENCIES:
        raise InvalidDependency(
            f"depends_on has {len(depends_on)} ids; allowed 1 … {MAX_DEPENDENCIES}"
        )
    unique = list(dict.fromkeys(depends_on))
    for dep in unique:
        if is_batch_id(dep):
            continue
        try:
            ids.parse_id(dep)
        except EchoMQError as exc:
            raise InvalidDependency(f"depends_on: {exc}") from None
        if dep == job_id:
            raise InvalidDependency(f"job {job_id} cannot depend on itself")
    return orjson.dumps(unique).decode()


class DependencyRow(NamedTuple):
    """One dependency in dependencyResults.lua's reply ("" where nothing is there)."""

    id: str
    state: str
    result: str
    error: str

    def outcome(self) -> Any:
        """The dependency's result, or the DependencyFailed that stands for it."""
        if is_batch_id(self.id):
            return None  # a batch has no result (it succeeded: the job was released)
        if self.state == State.COMPLETED:
            return decode_payload(self.result)
        if self.state == State.DEAD:
            return DependencyFailed(f"dependency {self.id} died: {self.error}")
        if not self.state:
            return DependencyFailed(f"dependency {self.id} was removed (or pruned)")
        return DependencyFailed(f"dependency {self.id} has not completed (it is {self.state})")


class DependentsReply(NamedTuple):
    """dependents.lua's reply: {state, blocked, blocked ids, readers, reader ids}."""

    state: str
    blocked: int
    blocked_ids: list[str]
    readers: int
    reader_ids: list[str]


def decode_dependency_results(queue: str, job_id: str, reply: Any) -> dict[str, Any]:
    if is_code(reply, E_NOT_FOUND):
        raise no_such_job(queue, job_id)
    width = len(DependencyRow._fields)
    rows = (
        DependencyRow(*(str(x) for x in reply[i : i + width])) for i in range(0, len(reply), width)
    )
    return {row.id: row.outcome() for row in rows}


def decode_dependents(queue: str, job_id: str, reply: Any) -> Dependents:
    if is_code(reply, E_NOT_FOUND):
        raise no_such_job(queue, job_id)
    r = DependentsReply(*reply)
    return Dependents(
        int(r.blocked),
        sorted(map(str, r.blocked_ids)),
        int(r.readers),
        sorted(map(str, r.reader_ids)),
    )


class DependencyCalls(EngineBase):
    """The results of a job's dependencies, and the jobs that depend on it."""

    def dependency_results(self, job_id: str) -> Call[dict[str, Any]]:
        """The results of the jobs ``job_id`` was added to depend on (depends_on), by
        id, in depends_on order. A dependency that did not complete maps to a
        DependencyFailed (a value, not raised: a job added with
        ``on_dependency_failure="run"`` runs anyway and sees it; retention keeps a
        completed one until its dependents finish, so "removed" means removed by
        hand, docs/lifecycle.md "Dependencies"). A handler calls it with its own
        job's id. JobNotFound for an unknown id."""
        find(job_id, self.queue)
        decode = partial(decode_dependency_results, self.queue, job_id)
        return self._script("dependencyResults", decode, job_id)

    def dependents(self, job_id: str, count: int = DEPENDENTS_SHOWN) -> Call[Dependents]:
        """The jobs that depend on ``job_id``: how many are blocked on it and how
        many it released may still read its result, with up to ``count`` ids of
        each (any of them, sorted). JobNotFound for an unknown id."""
        find(job_id, self.queue)
        check_int("count", count, 0, MAX_DEPENDENTS_SHOWN)
        decode = partial(decode_dependents, self.queue, job_id)
        return self._script("dependents", decode, job_id, str(count))

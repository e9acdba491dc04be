"""What every domain of the engine shares: the queue's names, options and keys,
how a script call is built, and the one rule for "no such job"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from echomq import ids, storage
from echomq.call import Call
from echomq.engine.job_options import JobOptions
from echomq.errors import JobNotFound
from echomq.keys import QueueKeys, check_name
from echomq.options import DEFAULT_DURABLE_TIMEOUT, QueueOptions, check_durable_timeout
from echomq.scripts import script

T = TypeVar("T")


class EngineBase:
    """The calls of one queue start here: its name, options and keys, and the
    script call builder every domain uses (``echomq.engine.Engine`` composes them).

    ``durable_timeout``: the seconds a durable add waits for a replica;
    ``durable``: whether adds are durable unless a call says otherwise.
    """

    def __init__(
        self,
        queue: str,
        options: QueueOptions,
        *,
        durable: bool = False,
        durable_timeout: float = DEFAULT_DURABLE_TIMEOUT,
    ) -> None:
        self.queue = check_name("queue", queue)
        self.options = options
        self.keys = QueueKeys(queue)
        self.durable = durable
        self.durable_timeout = check_durable_timeout(durable_timeout)
        #: job name → the options of the task of that name made on this queue
        #: object, applied to a job of that name added without them (new_job)
        self.task_defaults: dict[str, JobOptions] = {}
        self._fixed = self.keys.fixed()
        self._block = [self.keys.prefix, *options.script_block()]
        # a job given no max_attempts carries -n: the stored setting, else n (add.lua)
        self._default_attempts = -options.max_attempts
        backoff = options.backoff
        self._backoff_args = [
            str(round(backoff.base * 1000)),
            repr(float(backoff.factor)),
            str(round(backoff.cap * 1000)),
            repr(float(backoff.jitter)),
        ]

    def _script(self, name: str, parse: Callable[[Any], T], *args: str) -> Call[T]:
        """The call of script ``name`` on this queue (its fixed keys, its option
        block, then ``args``), its reply decoded by ``parse``."""
        return Call(parse=parse, script=script(name), keys=self._fixed, args=[*self._block, *args])

    # -- the stored format ---------------------------------------------------
    def check_format(self) -> Call[Call[int] | None]:
        """The greeting (echomq.sending.sender): read the queue's stored-format
        version and refuse a newer one (FormatTooNew); an older one, or none
        (a queue this client may not have written yet), answers with the call
        that upgrades it to this client's format (scripts/upgrade.lua, bounded;
        it writes nothing where nothing is stored), which the sender sends next."""

        def parse(raw: Any) -> Call[int] | None:
            storage.check_format(self.queue, raw)
            if raw is not None and raw != "" and int(raw) == storage.FORMAT:
                return None
            return self._script("upgrade", lambda v: storage.check_format(self.queue, v))

        return Call(parse=parse, command=("HGET", self.keys.meta, storage.FORMAT_FIELD))

    def exists(self) -> Call[bool]:
        """Whether the queue ever held a job (its meta hash exists)."""
        return Call(parse=lambda n: bool(int(n)), command=("EXISTS", self.keys.meta))


def names_a_job(job_id: object) -> bool:
    """The one rule for "no such job": a string that is not a well-formed job id
    names no job, like a well-formed unknown one (``get`` answers None, ``remove``
    False, the methods that act on the job raise JobNotFound). Only a value that
    is not a string at all is InvalidId (a bug in the caller, not a missing job)."""
    if not isinstance(job_id, str):
        ids.parse_id(job_id)  # raises InvalidId
    return ids.is_id(job_id)


def find(job_id: str, queue: str) -> None:
    """JobNotFound before anything is sent for a string that is no job id."""
    if not names_a_job(job_id):
        raise JobNotFound(f"no job {job_id!r:.120} in queue {queue!r} (not a job id)")


def no_such_job(queue: str, job_id: str) -> JobNotFound:
    """The JobNotFound of a script's E_NOT_FOUND for ``job_id``."""
    return JobNotFound(f"no job {job_id!r} in queue {queue!r}")

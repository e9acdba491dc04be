"""Every queue operation as data, with no I/O: what to send, and how to read the reply.

An operation is a :class:`~echomq.call.Call`: a script (by name, with KEYS
and ARGV) or one plain command, plus the function that turns the server's
reply into the caller's value, including the updates a reply makes to the
caller's :class:`Job` (a renewed lease, a release, progress). ``Queue`` and
``SyncQueue`` only hand calls to the sending layer (:mod:`echomq.sending`).
All input is checked here, before anything is sent, so bad input writes nothing.

The engine is one class composed of one class per domain, each in its module
(docs/design.md §7):

- ``jobs``: adding jobs, reading one (get, peek, read_field), change, cancel, remove
- ``claims``: claim, complete, fail, extend, release, progress, the doorbell
- ``lanes``: lane controls and weights, reading the lanes, pausing the queue
- ``reads``: pages of jobs, stats, waiting for a job, the event stream
- ``schedules``: schedule (read, then compare-and-set), list, pause, resume
- ``dependencies``: depends_on checked, dependency results, dependents
- ``configuration``: the queue's settings stored on the server
- ``maintenance``: maintain (and the schedule fires it finds due), retry_dead,
  purge_dead, drop_page
- ``observe``: a job's log (logs), the workers registry (workers, worker_beat)

Each reply is decoded by a named decoder of its domain (a function, or a
NamedTuple naming the fields the script's header lists); script return
codes are compared by their names in :mod:`echomq.errors`
(``E_NOT_FOUND`` …, the table ``SCRIPT_ERRORS``). Shared decoders are in
``replies``, the queue's keys and the script call builder in ``base``.
"""

from __future__ import annotations

from echomq.engine.base import EngineBase
from echomq.engine.batches import BatchCalls, Finished
from echomq.engine.claims import (
    BACKOFF_DELAY,
    MIN_BLOCK,
    STOP_BELL_TTL_MS,
    ClaimCalls,
    Claimed,
    CompletedAndClaimed,
    Wake,
)
from echomq.engine.configuration import SettingCalls
from echomq.engine.dependencies import (
    DEPENDENTS_SHOWN,
    MAX_DEPENDENCIES,
    MAX_DEPENDENTS_SHOWN,
    DependencyCalls,
)
from echomq.engine.job_options import (
    ADD_OPTION_KEYS,
    ITEM_KEYS,
    JOB_OPTION_KEYS,
    AddOptions,
    JobOptions,
)
from echomq.engine.jobs import PREVIEW_BYTES, JobCalls, NewJob
from echomq.engine.lanes import LaneCalls
from echomq.engine.maintenance import MAX_RETRY_CALLS, RETRY_PAGE, MaintenanceCalls
from echomq.engine.observe import ObserveCalls
from echomq.engine.reads import (
    EVENT_PAGE,
    FINISHED_SETS,
    MAX_EVENT_PAGE,
    MAX_WAIT,
    SUMMARY_ERROR_BYTES,
    WAIT_SLACK_MS,
    ReadCalls,
)
from echomq.engine.schedules import ScheduleCalls

__all__ = [
    "ADD_OPTION_KEYS",
    "BACKOFF_DELAY",
    "DEPENDENTS_SHOWN",
    "EVENT_PAGE",
    "FINISHED_SETS",
    "ITEM_KEYS",
    "JOB_OPTION_KEYS",
    "MAX_DEPENDENCIES",
    "MAX_DEPENDENTS_SHOWN",
    "MAX_EVENT_PAGE",
    "MAX_RETRY_CALLS",
    "MAX_WAIT",
    "MIN_BLOCK",
    "PREVIEW_BYTES",
    "RETRY_PAGE",
    "STOP_BELL_TTL_MS",
    "SUMMARY_ERROR_BYTES",
    "WAIT_SLACK_MS",
    "AddOptions",
    "BatchCalls",
    "Claimed",
    "CompletedAndClaimed",
    "Engine",
    "Finished",
    "JobOptions",
    "NewJob",
    "Wake",
]


class Engine(
    JobCalls,
    ClaimCalls,
    LaneCalls,
    ReadCalls,
    ScheduleCalls,
    DependencyCalls,
    BatchCalls,
    SettingCalls,
    MaintenanceCalls,
    ObserveCalls,
    EngineBase,
):
    """Builds the calls of one queue: every domain's calls on one object.

    ``durable_timeout``: the seconds a durable add waits for a replica;
    ``durable``: whether adds are durable unless a call says otherwise.
    """

"""echomq for Django (docs/django.md): jobs enqueued inside the open transaction.

Add ``"echomq.contrib.django"`` to ``INSTALLED_APPS`` and run ``migrate``:
the outbox table (``echomq_outbox``) and its dead-row table are made by the
app's migration. ``enqueue(queue, name, data, **options)`` writes the job as
one row on the current connection; inside ``transaction.atomic()`` it is part
of that transaction (a rollback leaves no job). ``manage.py echomq_relay``
turns committed rows into jobs; ``manage.py echomq_worker`` runs a worker
(with ``--relay``, the relay too). Settings: ``settings.ECHOMQ`` (``URL``:
the Valkey/Redis url, default ``ECHOMQ_URL`` or the embedded Valkey;
``QUEUES``: the queues the relay serves, default all; ``POLL``: the relay's
poll interval in seconds).
"""

from __future__ import annotations

from typing import Any, Unpack

from echomq.engine.job_options import AddOptions

__all__ = ["enqueue"]


def enqueue(
    queue: str,
    name: str,
    data: Any = None,
    *,
    using: str = "default",
    **options: Unpack[AddOptions],
) -> int:
    """Write job ``name`` for ``queue`` as one outbox row on connection ``using``;
    its row id. Checks the job as ``Queue.add`` does (bad input raises, nothing is
    written). Inside ``transaction.atomic()`` the job exists only if it commits."""
    from echomq.contrib.django.outbox import write_row

    return write_row(queue, name, data, using, dict(options))

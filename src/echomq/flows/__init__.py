"""Flows: what takes more than one call, above the transport (docs/design.md §7).

The sending layer (:mod:`echomq.sending`) sends one call at a time and knows
nothing of queues. A flow builds calls with the :class:`~echomq.engine.Engine`
and sends them through a sender, in a loop or shared between callers:

- :mod:`.events`: ``events()`` iterators, sharing one blocking read per queue
  and event loop (the event bell);
- :mod:`.waiters`: ``wait()``, sharing one subscription per queue and event loop;
- :mod:`.coalescing`: calls issued while another is in flight share the next
  one (concurrent adds; a worker's completions).
"""

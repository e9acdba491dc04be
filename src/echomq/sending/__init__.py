"""The sending layer: every command echomq sends goes through here.

``Queue`` and ``SyncQueue`` hand the engine's calls to a sender
(:mod:`.sender`); how a script goes (FCALL, EVALSHA) and the one rule for a
server that does not know it in :mod:`.scripts`, ways to send several
commands in :mod:`.pipelines`, durable sends (``WAIT``) in :mod:`.durable`.
No other module sends a command.
"""

from echomq.sending.sender import AsyncSender, SyncSender

__all__ = ["AsyncSender", "SyncSender"]

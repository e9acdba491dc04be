"""The sending layer: every command echomq sends goes through here.

``Queue`` and ``SyncQueue`` hand the engine's calls to a sender
(:mod:`.sender`); pipelines and the NOSCRIPT rule live in :mod:`.pipelines`,
durable sends (``WAIT``) in :mod:`.durable`. No other module sends a command.
"""

from echomq.sending.sender import AsyncSender, SyncSender

__all__ = ["AsyncSender", "SyncSender"]

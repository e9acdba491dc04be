"""A socket of another uid where the embedded server expects its own: it must be
refused (one line naming the uid) and never connected to.

Run as a child process by tests/integration/test_embedded_trust.py: by root, or
by any other user inside a user namespace that maps a second uid
(``unshare --user --map-root-user --map-auto``: newuidmap and a range for the
user in /etc/subuid). Either way this process may chown the socket it planted
to FOREIGN_UID, a uid it is not, so the socket really belongs to someone else
(the kernel says so; nothing is faked). Exits 0 when every check held; an
assertion's traceback otherwise.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

from echomq.embedded import EmbeddedServer
from echomq.errors import ServerError

#: the owner given to the planted socket: a uid this process is not.
FOREIGN_UID = 4242


def refused(action: Callable[[], object]) -> str:
    """The one-line ServerError ``action`` raised (AssertionError if it did not)."""
    try:
        action()
    except ServerError as exc:
        return str(exc)
    raise AssertionError(f"{action.__name__} used a socket that belongs to uid {FOREIGN_UID}")


def main() -> None:
    assert os.getuid() != FOREIGN_UID
    with tempfile.TemporaryDirectory(prefix="emq-") as home:
        server = EmbeddedServer(Path(home) / "echomq")
        server.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            foreign.bind(str(server.socket_path))
            foreign.listen(1)
            os.chown(server.socket_path, FOREIGN_UID, -1)
            assert server.socket_path.lstat().st_uid == FOREIGN_UID
            for action in (server.ensure_running, server.stop):
                message = refused(action)
                assert f"belongs to uid {FOREIGN_UID}" in message, message
                assert "\n" not in message, message
            foreign.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                foreign.accept()
                raise AssertionError("the embedded server's client connected to the socket")
        finally:
            foreign.close()
            server.socket_path.unlink(missing_ok=True)
            with contextlib.suppress(ServerError):
                server.stop()  # a server a broken check started does not outlive the check


if __name__ == "__main__":
    main()

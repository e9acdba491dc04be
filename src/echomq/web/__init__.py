"""The echomq web dashboard: one page, a JSON API and ``/metrics``.

Build the app with :func:`echomq.web.app.create_app`; ``echomq dashboard``
serves it. This package module stays light (no web framework import) so the
CLI can name the dashboard's settings without loading the app.
"""

from __future__ import annotations

#: environment variable the CLI reads the action token from when --token is not given.
TOKEN_ENV = "ECHOMQ_DASHBOARD_TOKEN"
#: host names a dashboard bound to loopback answers to (a DNS-rebound name is refused).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")

"""Who may change things: the action token, cross-site protection, the audit log.

The dashboard is read-only unless it was started with a token. An action
(retry, purge, weight change, pause, resume) must carry that token in the
``X-EchoMQ-Token`` header. A browser never adds a custom header by itself
and a cross-origin page cannot add one without a CORS preflight, which this
app never grants, so a forged cross-site request cannot carry the token; on
top of that, requests that a browser marks as cross-site (``Sec-Fetch-Site``)
or whose ``Origin`` is not the dashboard's own are refused, and the body must
be JSON (an HTML form cannot send that). Every action, done or refused, is
written to the ``echomq.web.audit`` logger and kept in a short in-memory list
the page shows.
"""

from __future__ import annotations

import hmac
import logging
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request

TOKEN_HEADER = "X-EchoMQ-Token"

audit_log = logging.getLogger("echomq.web.audit")


class ActionRefused(Exception):
    """An action request that may not run; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action as the audit log records it."""

    at: str
    client: str
    queue: str
    action: str
    outcome: str
    detail: dict[str, Any] = field(default_factory=dict)


class AuditLog:
    """The last ``keep`` actions, newest first; each also goes to the audit logger."""

    def __init__(self, keep: int = 200) -> None:
        self._entries: deque[AuditEntry] = deque(maxlen=keep)

    def record(
        self,
        request: Request,
        queue: str,
        action: str,
        outcome: str,
        detail: dict[str, Any] | None = None,
    ) -> AuditEntry:
        client = request.client.host if request.client else "?"
        entry = AuditEntry(
            datetime.now(UTC).isoformat(timespec="milliseconds"),
            client,
            queue,
            action,
            outcome,
            detail or {},
        )
        self._entries.appendleft(entry)
        level = logging.INFO if outcome == "ok" else logging.WARNING
        audit_log.log(
            level, "%s queue=%s client=%s %s: %s", action, queue, client, detail or {}, outcome
        )
        return entry

    def entries(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self._entries]


class ActionGuard:
    """Checks that a request may perform an action (see the module docstring)."""

    def __init__(self, token: str | None) -> None:
        self._token = token or None

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def check(self, request: Request) -> None:
        """Raise ActionRefused unless the request is same-site JSON with the right token."""
        if self._token is None:
            raise ActionRefused(
                403,
                "actions are disabled: this dashboard was started "
                "without a token (--token or ECHOMQ_DASHBOARD_TOKEN)",
            )
        _check_same_site(request)
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise ActionRefused(415, "actions take a JSON body (Content-Type: application/json)")
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), self._token.encode()):
            raise ActionRefused(401, f"missing or wrong token in the {TOKEN_HEADER} header")


def _check_same_site(request: Request) -> None:
    fetch_site = request.headers.get("sec-fetch-site", "").lower()
    if fetch_site in ("cross-site", "same-site"):
        raise ActionRefused(403, f"cross-site request refused (Sec-Fetch-Site: {fetch_site})")
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin.rstrip("/").lower() != own.lower():
        raise ActionRefused(403, f"cross-site request refused (Origin {origin!r} is not {own!r})")

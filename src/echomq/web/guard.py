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
the page shows; every logged value passes :func:`audit_text` first.
"""

from __future__ import annotations

import hmac
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request

from echomq.urls import redact_url

TOKEN_HEADER = "X-EchoMQ-Token"

audit_log = logging.getLogger("echomq.web.audit")


class ActionRefused(Exception):
    """An action request that may not run; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


#: longest text one logged value keeps (the rest is replaced by "…").
AUDIT_TEXT_LIMIT = 200


def audit_text(value: object, limit: int = AUDIT_TEXT_LIMIT, secrets: Iterable[str] = ()) -> str:
    """Any value as it may be logged or shown: the one helper every logged value passes.

    Secrets (the action token, passwords in urls) become ``***``; control and
    other unprintable characters (newlines, ESC, U+2028, …) and backslashes are
    written as escapes, so one request can never forge a log line or drive a
    terminal; text past ``limit`` characters is cut with ``…``."""
    text = value if isinstance(value, str) else str(value)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = redact_url(text)
    if len(text) > limit:
        text = text[:limit] + "…"
    return "".join(
        ch if ch.isprintable() and ch != "\\" else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action as the audit log records it (every text already through audit_text)."""

    at: str
    client: str
    queue: str
    action: str
    outcome: str
    detail: dict[str, Any] = field(default_factory=dict)
    refused: bool = False


class AuditLog:
    """Recent actions, newest first; each also goes to the ``echomq.web.audit`` logger.

    Accepted actions (done, or failed on bad input after the guard let them
    through) and refused requests are kept apart, ``keep`` and
    ``keep_refused`` of each: a flood of refused requests, which anyone who
    can reach the page may send, never pushes real changes out of the list."""

    def __init__(
        self, keep: int = 200, keep_refused: int = 50, secrets: Iterable[str] = ()
    ) -> None:
        self._accepted: deque[tuple[int, AuditEntry]] = deque(maxlen=keep)
        self._refused: deque[tuple[int, AuditEntry]] = deque(maxlen=keep_refused)
        self._secrets = tuple(s for s in secrets if s)
        self._seq = itertools.count()

    def clean(self, value: object) -> str:
        """``value`` through audit_text with this log's secrets."""
        return audit_text(value, secrets=self._secrets)

    def record(
        self,
        request: Request,
        queue: str,
        action: str,
        outcome: str,
        detail: dict[str, Any] | None = None,
        *,
        refused: bool = False,
    ) -> AuditEntry:
        client = request.client.host if request.client else "?"
        clean = self.clean
        entry = AuditEntry(
            datetime.now(UTC).isoformat(timespec="milliseconds"),
            clean(client),
            clean(queue),
            clean(action),
            clean(outcome),
            {clean(k): _clean_value(v, clean) for k, v in (detail or {}).items()},
            refused,
        )
        (self._refused if refused else self._accepted).appendleft((next(self._seq), entry))
        level = logging.INFO if outcome == "ok" else logging.WARNING
        audit_log.log(
            level,
            "%s queue=%s client=%s %s: %s",
            entry.action,
            entry.queue,
            entry.client,
            clean(orjson.dumps(entry.detail).decode()) if entry.detail else "{}",
            entry.outcome,
        )
        return entry

    def entries(self) -> list[dict[str, Any]]:
        """Accepted and refused entries together, newest first."""
        merged = sorted([*self._accepted, *self._refused], key=lambda pair: -pair[0])
        return [asdict(entry) for _, entry in merged]


def _clean_value(value: Any, clean: Callable[[object], str]) -> Any:
    """A detail value for the log: numbers and flags kept, texts (also in lists) cleaned."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        shown = [_clean_value(v, clean) for v in value[:20]]
        return shown + ([f"… {len(value) - 20} more"] if len(value) > 20 else [])
    return clean(value)


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
                "without a token (--token-file, --token or ECHOMQ_DASHBOARD_TOKEN)",
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

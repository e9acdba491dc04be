"""What every command shares: the queue options, error translation, output helpers.

Why one module: the exit-code contract (0 success, 1 user error in one line
without a traceback, 2 usage) is kept in one place, :class:`EchoGroup`, which
turns every echomq or connection error raised by any command into a
one-line ``Error: …`` and exit status 1.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import redis

from echomq.errors import EchoMQError, ServerError
from echomq.escaping import escape_text as escape_text  # the CLI imports it from here
from echomq.keys import DEFAULT_LANE
from echomq.options import MAX_JSON_DEPTH
from echomq.sync import SyncQueue
from echomq.urls import redact_url

if TYPE_CHECKING:  # Rich is imported on first use (a quick command never needs it)
    from rich.console import Console

    console: Console

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: environment variable naming the queue when ``--queue`` is not given.
QUEUE_ENV = "ECHOMQ_QUEUE"
#: how the default lane (jobs added without a group) is shown.
DEFAULT_LANE_LABEL = "(default)"

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

#: width of tables when stdout is not a terminal (pipes, logs, tests) and COLUMNS is unset.
PIPE_WIDTH = 140


def output_width() -> int:
    """Columns of the terminal; PIPE_WIDTH off a terminal unless COLUMNS says otherwise."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not sys.stdout.isatty():
        return PIPE_WIDTH
    return shutil.get_terminal_size().columns


def __getattr__(name: str) -> Any:
    """``console``: Rich output, made (and Rich imported) on first use."""
    if name != "console":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    made = Console(highlight=False, width=PIPE_WIDTH if piped else None)
    globals()["console"] = made
    return made


def plain_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """A table as aligned lines of text, two spaces between columns, a rule under the
    header; columns whose index is in ``right`` are right-aligned. (The quick
    commands print this instead of a Rich table, which would cost Rich's import.)"""
    body = [list(r) for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(headers), "  ".join("─" * w for w in widths), *(line(r) for r in body)]


def fail(message: str) -> NoReturn:
    """Stop the command with a user error: one line on stderr, exit status 1."""
    raise click.ClickException(message)


def first_line(text: str) -> str:
    """The first non-empty line of ``text`` (server errors may carry a log tail)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def user_error(exc: EchoMQError | redis.RedisError) -> click.ClickException:
    """The one-line error an expected exception is reported as (url passwords hidden)."""
    text = redact_url(str(exc))
    detail = escape_text(first_line(text), markup=False)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return click.ClickException(f"cannot reach the server: {detail}")
    if isinstance(exc, redis.RedisError):
        return click.ClickException(f"server error: {detail}")
    message = detail or type(exc).__name__
    if isinstance(exc, ServerError) and "\n" in text.strip():
        message += " (the server log says why: echomq server logs)"
    return click.ClickException(message)


class EchoGroup(click.Group):
    """A click group that reports echomq and connection errors as one line, exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (EchoMQError, redis.RedisError) as exc:
            raise user_error(exc) from None


def url_option(func: F) -> F:
    """Add ``--url`` (or ECHOMQ_URL; default: the embedded Valkey) to a command."""
    return click.option(
        "--url",
        envvar="ECHOMQ_URL",
        show_envvar=True,
        metavar="URL",
        help="Server url (redis://, rediss://, unix://); default: the embedded Valkey.",
    )(func)


def queue_options(func: F) -> F:
    """Add ``--queue/-q`` and ``--url`` to a command (in that order in its help)."""
    func = url_option(func)
    func = click.option(
        "--queue",
        "-q",
        envvar=QUEUE_ENV,
        show_envvar=True,
        default="default",
        show_default=True,
        metavar="NAME",
        help="Queue name.",
    )(func)
    return func


def json_option(func: F) -> F:
    """Add ``--json``: machine-readable output on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def watch_options(func: F) -> F:
    """Add ``--watch`` and ``--interval``: redraw until Ctrl-C."""
    func = click.option(
        "--interval",
        "-n",
        type=click.FloatRange(min=0.1),
        default=1.0,
        show_default=True,
        metavar="SECONDS",
        help="Seconds between refreshes with --watch.",
    )(func)
    return click.option("--watch", "-w", is_flag=True, help="Refresh until Ctrl-C.")(func)


@contextmanager
def open_queue(name: str, url: str | None) -> Iterator[SyncQueue]:
    """A SyncQueue on ``url`` (None: ECHOMQ_URL, else the embedded Valkey), closed after."""
    queue = SyncQueue(name, url or None)
    try:
        yield queue
    finally:
        queue.close()


# the most calls one listing command makes before it prints a "more:" cursor
MAX_PAGE_CALLS = 20


def gather_pages(
    fetch: Callable[[str | None, int], tuple[Sequence[T], str | None]],
    cursor: str | None,
    count: int,
) -> tuple[list[T], str | None]:
    """Up to ``count`` items from ``fetch(cursor, left)`` (a page and the next
    cursor, None at the end), page after page: a page may come back short (the
    server bounds each call's work), so this goes on until ``count``, the end,
    or MAX_PAGE_CALLS calls; returns the items and the cursor to go on from."""
    found: list[T] = []
    for _ in range(MAX_PAGE_CALLS):
        items, cursor = fetch(cursor, count - len(found))
        found.extend(items)
        if cursor is None or len(found) >= count:
            break
    return found, cursor


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON (datetimes as ISO 8601)."""
    text = json.dumps(value, indent=2, default=_json_default, ensure_ascii=False)
    click.echo(escape_text(text, json_text=True))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def lane_label(group: str | None, *, markup: bool = True) -> str:
    """A lane's name for humans (escaped, see escape_text): the group, or ``(default)``."""
    if group is None or group == DEFAULT_LANE:
        return DEFAULT_LANE_LABEL
    return escape_text(group, markup=markup)


def parse_group(text: str) -> str | None:
    """A GROUP argument: ``""`` or ``(default)`` select the default lane."""
    return None if text in ("", DEFAULT_LANE_LABEL) else text


def parse_json(text: str, what: str) -> Any:
    """Decode JSON given on the command line; ``-`` reads it from stdin. Bad JSON exits 1."""
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f"{text[:60]!r}"
        )
    except RecursionError:
        fail(f"{what} is nested too deeply to read; payloads allow at most {MAX_JSON_DEPTH} levels")


def percent(part: float, whole: float) -> str:
    """``part / whole`` as a percentage with one decimal ("–" when whole is 0)."""
    return "–" if whole == 0 else f"{100 * part / whole:.1f}%"


def when(value: datetime | None) -> str:
    """A timestamp in local time to the millisecond, or "–"."""
    return "–" if value is None else value.astimezone().isoformat(timespec="milliseconds")


def short_when(value: datetime | None) -> str:
    """A timestamp in local time to the second, for tables ("–" if None)."""
    return "–" if value is None else f"{value.astimezone():%Y-%m-%d %H:%M:%S}"

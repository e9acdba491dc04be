"""How script calls go on the wire, and the one rule for a server that does not know them.

A sender sends scripts as functions of the library (``FCALL``,
echomq.scripts.library) while its :class:`ScriptForm` says so, else by SHA1
(``EVALSHA``). A server may not know the code yet (first use, a restart
without persistence, ``FUNCTION FLUSH``/``SCRIPT FLUSH``, a new cluster
primary): it answers "Function not found" or NOSCRIPT, and the script did not
run. Then, for calls sent together on one connection (a pipeline, or one
call), the call that got that answer and every call after it are sent again:
what came before it already ran and must not run twice.

- "Function not found": the library is loaded (``FUNCTION LOAD``; on a
  cluster on every primary, as the FCALL goes to the queue's node) and the
  calls go again by FCALL. "Library already exists" is success: another
  client loaded it first.
- A server without functions (FCALL or FUNCTION unknown: before Valkey/Redis
  7, or a user not allowed them), or one that cannot compile the library,
  turns the sender to EVALSHA for good; those calls go again as below.
- NOSCRIPT (EVALSHA), or any other failure to load the library: each script
  among those calls is loaded with ``SCRIPT LOAD`` and the calls go again by
  EVALSHA, in one round trip. Not by EVAL: Valkey 8.1+ evicts scripts that
  EVAL cached once more than 500 are cached (least recently used first), so
  on a server shared with clients that send many EVAL scripts, a rarely used
  script (``stats``) would be evicted again and again and sent in full on
  every call; ``SCRIPT LOAD``-ed scripts and functions are never evicted.
  If ``SCRIPT LOAD`` itself fails, the calls go by EVAL.

At most one repair per send (plus the EVAL fallback): a second miss comes
back to the caller as the error it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from echomq.call import Call, Form
from echomq.scripts.library import library

#: sends raw commands on one connection; replies come back in order, errors as values.
Execute = Callable[[list[tuple[Any, ...]]], list[Any]]
AsyncExecute = Callable[[list[tuple[Any, ...]]], Awaitable[list[Any]]]
#: loads the library where the calls go; the server's reply (an error as a value).
Load = Callable[[], Any]
AsyncLoad = Callable[[], Awaitable[Any]]

_NOT_FOUND = "Function not found"
_EXISTS = "already exists"
_UNKNOWN = ("unknown command", "unknown subcommand")
_REFUSED = "Error compiling"

log = logging.getLogger("echomq")


@dataclass(slots=True)
class ScriptForm:
    """How one sender sends scripts: as functions (FCALL) while ``functions`` is True,
    else by SHA1 (EVALSHA). Set it to False to send by EVALSHA from the start."""

    functions: bool = True

    @property
    def form(self) -> Form:
        return "FCALL" if self.functions else "EVALSHA"


def load_command() -> tuple[str, str, str]:
    """The command that loads the library (its name carries its version)."""
    return ("FUNCTION", "LOAD", library().source)


def _missing(reply: Any) -> bool:
    """True if ``reply`` says the server does not know the code, or will not run it as a
    function (FCALL unknown or not allowed): either way the script did not run."""
    if isinstance(reply, NoScriptError):
        return True
    if not isinstance(reply, ResponseError):
        return False
    text = str(reply)
    return text.startswith(_NOT_FOUND) or (_unsupported(reply) and "'fcall" in text.lower())


def _first_missing(replies: Sequence[Any]) -> int | None:
    for i, reply in enumerate(replies):
        if _missing(reply):
            return i
    return None


def _unsupported(reply: Any) -> bool:
    """True if ``reply`` shows the server has no functions for us (or forbids them)."""
    if isinstance(reply, NoPermissionError):
        return True
    return isinstance(reply, ResponseError) and str(reply).startswith(_UNKNOWN)


def _loaded(reply: Any, scripts: ScriptForm) -> bool:
    """Whether the library is there after FUNCTION LOAD answered ``reply``; turns the
    sender to EVALSHA if the server has no functions, or refuses this library (it
    would refuse it again on every call: a script that does not build as a function,
    which tests/integration/test_function_library.py exists to catch first)."""
    if not isinstance(reply, Exception) or _EXISTS in str(reply):
        return True
    if _unsupported(reply):
        scripts.functions = False
    elif _REFUSED in str(reply):
        log.warning("echomq's function library was refused, scripts go by EVALSHA: %s", reply)
        scripts.functions = False
    return False


def _wired(calls: Sequence[Call[Any]], form: Form) -> list[tuple[Any, ...]]:
    return [call.wire(form) for call in calls]


def _script_loads(calls: Sequence[Call[Any]]) -> list[tuple[Any, ...]]:
    """SCRIPT LOAD of each script among ``calls`` (once each)."""
    sources = dict.fromkeys(call.script.source for call in calls if call.script is not None)
    return [("SCRIPT", "LOAD", source) for source in sources]


def _loads_failed(replies: Sequence[Any]) -> bool:
    return any(isinstance(reply, Exception) for reply in replies)


async def send_async(
    execute: AsyncExecute, load: AsyncLoad, scripts: ScriptForm, calls: Sequence[Call[Any]]
) -> list[Any]:
    """The raw replies of ``calls`` sent together (errors as values)."""
    form = scripts.form
    replies = await execute(_wired(calls, form))
    first = _first_missing(replies)
    if first is None:
        return replies
    rest = calls[first:]
    if form == "FCALL":
        reply = replies[first] if _unsupported(replies[first]) else await load()
        if _loaded(reply, scripts):
            replies[first:] = await execute(_wired(rest, "FCALL"))
            return replies
    loads = _script_loads(rest)
    again = await execute([*loads, *_wired(rest, "EVALSHA")])
    if _loads_failed(again[: len(loads)]):
        again[len(loads) :] = await execute(_wired(rest, "EVAL"))
    replies[first:] = again[len(loads) :]
    return replies


# generated from send_async by tools/unasync.py: edit that, then run it
def send(
    execute: Execute, load: Load, scripts: ScriptForm, calls: Sequence[Call[Any]]
) -> list[Any]:
    """The raw replies of ``calls`` sent together (errors as values)."""
    form = scripts.form
    replies = execute(_wired(calls, form))
    first = _first_missing(replies)
    if first is None:
        return replies
    rest = calls[first:]
    if form == "FCALL":
        reply = replies[first] if _unsupported(replies[first]) else load()
        if _loaded(reply, scripts):
            replies[first:] = execute(_wired(rest, "FCALL"))
            return replies
    loads = _script_loads(rest)
    again = execute([*loads, *_wired(rest, "EVALSHA")])
    if _loads_failed(again[: len(loads)]):
        again[len(loads) :] = execute(_wired(rest, "EVAL"))
    replies[first:] = again[len(loads) :]
    return replies


# end generated

"""Write the blocking twins of echomq's asyncio code, so a fix is written once.

Where a blocking function differs from its asyncio twin only by ``await`` and
a few names, the blocking one is generated. In the module, a region

    # generated from send_async by tools/unasync.py: edit that, then run it
    def send(...): ...
    # end generated

holds the twin of ``send_async`` (``AsyncSender.send`` names a method), made
by token replacement (:data:`SUBSTITUTIONS`: ``async def`` → ``def``,
``await`` dropped, ``redis.asyncio.`` → ``redis.``, ``AsyncSender`` →
``SyncSender``, a flow's per-loop state ``_LoopBell`` → ``SyncBell``, a
name's ``_async`` suffix dropped, …) and then formatted by ``ruff format``.
A line of the asyncio code that ends with
``# unasync: async only`` has no blocking twin. A ``# type: ignore`` that
only the blocking side needs (redis-py's blocking client is partly untyped)
is written ``# type: ignore[no-untyped-call, unused-ignore]``.

Run ``python tools/unasync.py`` after editing an asyncio original;
``--check`` lists the modules whose twins drifted (tests/unit/test_sync_twins.py
fails on the same). Regions, not whole ``_async/`` → ``_sync/`` trees: the twins
live in the modules that other code imports them from, beside the code both
share.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "src" / "echomq"

#: asyncio → blocking, applied in order to every line of an original.
SUBSTITUTIONS: list[tuple[str, str]] = [
    (r"\basync (def|with|for) ", r"\1 "),
    (r"\bawait ", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bredis\.asyncio\.", "redis."),
    (r"\bcontextlib\.asynccontextmanager\b", "contextlib.contextmanager"),
    (r"\bAsync(Iterator|Generator|Iterable)\b", r"\1"),
    (r"\bAsync(Execute|Load)\b", r"\1"),
    (r"\bAsync(Client|Sender|Bell|Waits)\b", r"Sync\1"),
    # an asyncio flow keeps its state per event loop (``_LoopBell``); a blocking
    # one is its own state (``SyncBell``)
    (r"\b_Loop(\w+)\b", r"Sync\1"),
    (r"\basyncio\.(Event|Semaphore)\b", r"threading.\1"),
    (r"\bNode\b", "SyncNode"),
    (r"\bon_async_client\b", "on_client"),
    (r"\baclose\b", "close"),
    (r"\b(\w+)_async\b", r"\1"),
    (r"\bCoroutine\[Any, Any, (\w+)\]", r"\1"),
    (r"\ban asyncio\b", "a blocking"),
    (r"\basyncio (?=[a-z])", "blocking "),
]
_COMPILED = [(re.compile(pattern), replacement) for pattern, replacement in SUBSTITUTIONS]

BEGIN = re.compile(r"^(?P<indent> *)# generated from (?P<source>[\w.]+) by tools/unasync\.py\b")
END = re.compile(r"^ *# end generated$")
ASYNC_ONLY = "# unasync: async only"


class UnasyncError(Exception):
    """A region without its end, or naming an original that is not there."""


def unasync_line(line: str) -> str:
    for pattern, replacement in _COMPILED:
        line = pattern.sub(replacement, line)
    return line


def _original(tree: ast.Module, lines: list[str], name: str) -> str:
    """The source text of ``name`` (a function, or Class.method), dedented."""
    body: list[ast.stmt] = tree.body
    *classes, function = name.split(".")
    for class_name in classes:
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not found:
            raise UnasyncError(f"no class {class_name!r} for {name!r}")
        body = found[0].body
    defs = [n for n in body if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)]
    node = next((n for n in defs if n.name == function), None)
    if node is None or node.end_lineno is None:
        raise UnasyncError(f"no function {name!r}")
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))


def _twin(original: str, indent: str) -> list[str]:
    kept = [line for line in original.splitlines(keepends=True) if ASYNC_ONLY not in line]
    return [indent + unasync_line(line) if line.strip() else line for line in kept]


def generate(text: str, path: Path) -> str:
    """``text`` (a module) with every generated region written again."""
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text, filename=str(path))
    out: list[str] = []
    i = 0
    while i < len(lines):
        begin = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if begin is None:
            continue
        end = next((j for j in range(i, len(lines)) if END.match(lines[j])), None)
        if end is None:
            raise UnasyncError(f"{path}: region of {begin['source']} has no '# end generated'")
        out += _twin(_original(tree, lines, begin["source"]), begin["indent"])
        out.append("\n")
        i = end
    return _formatted("".join(out), path)


def _formatted(text: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise UnasyncError(f"{path}: ruff format failed: {done.stderr.strip()}")
    return done.stdout


def modules() -> list[Path]:
    """Every module of echomq that holds a generated region."""
    return sorted(
        path
        for path in SOURCES.rglob("*.py")
        if any(BEGIN.match(line) for line in path.read_text().splitlines())
    )


def main(argv: list[str]) -> int:
    check = "--check" in argv
    drifted = []
    for path in modules():
        text = path.read_text()
        made = generate(text, path)
        if made != text:
            drifted.append(path.relative_to(ROOT))
            if not check:
                path.write_text(made)
    for path in drifted:
        print(f"{'drifted' if check else 'rewrote'}: {path}")
    return 1 if check and drifted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The layers of docs/design.md §7, read from the source: no import circle, and no
arrow §7 forbids.

Every ``import`` and ``from … import`` of every module under ``src/echomq``
counts, wherever it is written: at the top, under ``if TYPE_CHECKING:``, or
inside a function (a lazy import is still an arrow; it only hides a circle
from the interpreter). An import names the most specific module it reaches:
``from echomq.sending import scripts`` is an arrow to ``echomq.sending.scripts``,
``from echomq.sending import AsyncSender`` one to ``echomq.sending``. The root
package ``echomq`` (its ``__init__`` only re-exports the public names) is no
node of the graph.

Known exceptions, if any, are listed below with the work that removes them;
whoever removes one must delete its entry (a test fails while an entry names
an arrow or circle that is gone). There are none: the flows (events, waiters,
coalescing) live in echomq.flows above the transport, and the server's
probes beside the embedded server (echomq.serverprobes).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "echomq"

#: (importer prefix, imported prefix): arrows §7 forbids. A prefix matches the
#: module itself and everything under it (``echomq.sending`` matches
#: ``echomq.sending.scripts``).
FORBIDDEN = [
    # the runtime package uses the Queue's public methods only
    ("echomq.worker", "echomq.sending"),
    ("echomq.worker", "echomq.connection"),
    ("echomq.worker", "echomq.engine"),
    # the command line and the dashboard use the queues, echomq.reports and
    # echomq.discovery; neither sends a command of its own
    ("echomq.cli", "echomq.sending"),
    ("echomq.cli", "echomq.connection"),
    ("echomq.web", "echomq.sending"),
    ("echomq.web", "echomq.connection"),
    # the transport carries calls; it does not build them
    ("echomq.sending", "echomq.engine"),
    ("echomq.sending", "echomq.flows"),
    # the embedded server's probes treat the server as a process, not a queue store
    ("echomq.serverprobes", "echomq.connection"),
    ("echomq.serverprobes", "echomq.sending"),
]

#: forbidden arrows that still exist, each with the work that removes it: delete
#: an entry (importer, forbidden prefix) when its arrow is gone.
KNOWN_ARROWS: set[tuple[str, str]] = set()

#: import circles that still exist: delete an entry when its circle is gone.
KNOWN_CIRCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / ROOT).rglob("*.py"))}


def imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The echomq modules ``module`` imports anywhere in its source, with the line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in modules else base), node.lineno


def graph() -> dict[str, dict[str, int]]:
    """module → {module it imports: the first line that does}, echomq modules only."""
    modules = all_modules()
    edges: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        targets = edges.setdefault(module, {})
        for target, line in imported(module, path, modules):
            if target in modules and target != ROOT and target != module:
                targets.setdefault(target, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = frozenset(stack[stack.index(node) :])
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def forbidden_arrows(edges: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    """(importer, forbidden prefix) → where, for every arrow FORBIDDEN names."""
    found = {}
    for importer, targets in edges.items():
        for target, line in targets.items():
            for source_prefix, target_prefix in FORBIDDEN:
                if under(importer, source_prefix) and under(target, target_prefix):
                    found[(importer, target_prefix)] = f"{importer}:{line} imports {target}"
    return found


def test_the_walk_sees_imports_at_every_level() -> None:
    """Not the property: the walk must see a TYPE_CHECKING import and a lazy one, or
    the other tests could pass by seeing nothing."""
    edges = graph()
    assert "echomq.engine" in edges["echomq.queue"]  # top level
    assert "echomq.sync" in edges["echomq.queue"]  # under TYPE_CHECKING and lazily
    assert len(edges) > 60


def test_no_import_circle() -> None:
    found = set(circles(graph()))
    new = sorted(sorted(c) for c in found - KNOWN_CIRCLES)
    assert not new, f"import circles: {new}"


def test_no_arrow_the_layers_forbid() -> None:
    found = forbidden_arrows(graph())
    new = sorted(where for key, where in found.items() if key not in KNOWN_ARROWS)
    assert not new, "arrows docs/design.md §7 forbids:\n" + "\n".join(new)


def test_known_arrows_still_exist() -> None:
    """An exception that is gone must leave the list, so it cannot come back unseen."""
    gone = sorted(KNOWN_ARROWS - set(forbidden_arrows(graph())))
    assert not gone, f"gone (well done): delete {gone} from KNOWN_ARROWS"


def test_known_circles_still_exist() -> None:
    gone = sorted(sorted(c) for c in KNOWN_CIRCLES - set(circles(graph())))
    assert not gone, f"gone (well done): delete {gone} from KNOWN_CIRCLES"


#: the engine's domains (docs/design.md §7) build on its shared parts only; one
#: domain importing another is an arrow to be named here, with its reason.
ENGINE_SHARED = {"echomq.engine.base", "echomq.engine.replies", "echomq.engine.job_options"}
ENGINE_DOMAIN_ARROWS = {
    # an add checks its depends_on with the dependencies domain's encoder
    ("echomq.engine.jobs", "echomq.engine.dependencies"),
}


def test_engine_domains_import_only_its_shared_parts() -> None:
    edges = graph()
    found = {
        (importer, target)
        for importer, targets in edges.items()
        if under(importer, "echomq.engine") and importer != "echomq.engine"
        for target in targets
        if under(target, "echomq.engine") and target not in ENGINE_SHARED
    }
    assert found == ENGINE_DOMAIN_ARROWS, f"engine domain arrows: {sorted(found)}"

"""The layers of docs/design.md §7, read from the source: no import circle, and no
arrow §7 forbids.

Every ``import`` and ``from … import`` of every module under ``src/echomq``
counts, wherever it is written: at the top, under ``if TYPE_CHECKING:``, or
inside a function (a lazy import is still an arrow; it only hides a circle
from the interpreter). An import names the most specific module it reaches:
``from echomq.sending import scripts`` is an arrow to ``echomq.sending.scripts``,
``from echomq.sending import AsyncSender`` one to ``echomq.sending``. The root
package ``echomq`` (its ``__init__`` only re-exports the public names) is no
node of the graph: ``from echomq import Queue`` is an arrow to the module the
root takes ``Queue`` from (``echomq.queue``), so a public name cannot hide one.

There are no exceptions: any circle, and any arrow §7 forbids, fails.
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
    ("echomq.worker", "echomq.cli"),
    ("echomq.worker", "echomq.web"),
    # the transport carries calls; it does not build them, nor knows who sends them
    ("echomq.sending", "echomq.engine"),
    ("echomq.sending", "echomq.flows"),
    ("echomq.sending", "echomq.queue"),
    ("echomq.sending", "echomq.sync"),
    ("echomq.sending", "echomq.shell"),
    # the engine does no I/O: it builds calls and reads replies
    ("echomq.engine", "echomq.sending"),
    ("echomq.engine", "echomq.connection"),
    ("echomq.engine", "echomq.flows"),
    ("echomq.engine", "echomq.queue"),
    ("echomq.engine", "echomq.sync"),
    ("echomq.engine", "echomq.shell"),
    # flows sit below the queues that use them
    ("echomq.flows", "echomq.queue"),
    ("echomq.flows", "echomq.sync"),
    ("echomq.flows", "echomq.shell"),
    ("echomq.flows", "echomq.worker"),
    # the embedded server's probes treat the server as a process, not a queue store
    ("echomq.serverprobes", "echomq.connection"),
    ("echomq.serverprobes", "echomq.sending"),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / ROOT).rglob("*.py"))}


def root_names(modules: dict[str, Path]) -> dict[str, str]:
    """Each name the root package ``echomq`` re-exports → the module it comes from."""
    found = {}
    for node in ast.walk(ast.parse(modules[ROOT].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(ROOT + "."):
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found


def imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The echomq modules ``module`` imports anywhere in its source, with the line
    (a name taken from the root package: the module the root takes it from)."""
    reexported = root_names(modules)
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
                if sub in modules:
                    yield sub, node.lineno
                elif base == ROOT:
                    yield reexported.get(alias.name, ROOT), node.lineno
                else:
                    yield base, node.lineno


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


def test_a_public_name_taken_from_the_root_is_an_arrow_to_its_module() -> None:
    modules = all_modules()
    names = root_names(modules)
    assert names["Queue"] == "echomq.queue" and names["SyncQueue"] == "echomq.sync"
    assert names["JobNotFound"] == "echomq.errors"


def test_the_walk_finds_a_planted_circle_and_a_planted_arrow() -> None:
    """Not the property: the checks themselves fail on what they are for."""
    edges = graph()
    planted = {module: dict(targets) for module, targets in edges.items()}
    planted["echomq.sending.sender"]["echomq.engine.jobs"] = 1
    planted["echomq.engine.jobs"]["echomq.sending.sender"] = 1
    assert frozenset({"echomq.sending.sender", "echomq.engine.jobs"}) in circles(planted)
    assert ("echomq.sending.sender", "echomq.engine") in forbidden_arrows(planted)


def test_no_import_circle() -> None:
    found = sorted(sorted(c) for c in circles(graph()))
    assert not found, f"import circles: {found}"


def test_no_arrow_the_layers_forbid() -> None:
    found = sorted(forbidden_arrows(graph()).values())
    assert not found, "arrows docs/design.md §7 forbids:\n" + "\n".join(found)


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

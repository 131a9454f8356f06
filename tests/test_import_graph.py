"""The package's module import graph: no cycles, no causal method importing another, and the
layering of ARCHITECTURE.md.

The graph is read from the source with ``ast``, not from ``sys.modules``: an import inside a
function counts like one at the top of the module (moving an import into a function hides a
cycle from Python's import order, not from the design), while imports under
``if TYPE_CHECKING:`` do not count (they never run). Implicit imports of parent packages are not
edges: Python runs a package's ``__init__`` before its submodules, so they cannot form a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import dynid
from dynid.causal import registry

PACKAGE_DIR = Path(dynid.__file__).parent

# Modules any layer may import: errors, hyperparameter parsing, JSON conversion and the JSON
# document kinds, atomic writes, device/seed handling, pools of spawned worker processes and the
# package root (its version).
INFRASTRUCTURE = frozenset(
    {"dynid", "dynid.errors", "dynid.params", "dynid.jsonable", "dynid.documents", "dynid.atomic",
     "dynid.runtime", "dynid.worker_processes"}
)
# ARCHITECTURE.md's "may import" column for the packages below the API; packages not listed
# (api, selection, modelfile, report, cli, runner) may import every one of these.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "dynid.data": frozenset(),
    "dynid.metrics": frozenset(),
    "dynid.systems": frozenset(),
    "dynid.linear": frozenset({"dynid.data"}),
    "dynid.training": frozenset({"dynid.data"}),
    "dynid.symbolic": frozenset({"dynid.data", "dynid.linear"}),
    "dynid.causal": frozenset({"dynid.data", "dynid.linear", "dynid.training", "dynid.symbolic"}),
    "dynid.models": frozenset(
        {"dynid.data", "dynid.linear", "dynid.training", "dynid.symbolic", "dynid.metrics",
         "dynid.systems"}
    ),
}
# The console-script entry point is the one module outside the CLI that may start it.
CLI_ENTRY_POINTS = frozenset({"dynid.__main__"})


# -- building the graph ----------------------------------------------------------------------------
def package_modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package at ``package_dir``."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node`` at any depth, except in ``if TYPE_CHECKING:``
    bodies (their ``else`` branch runs, so it counts)."""
    for child in ast.iter_child_nodes(node):
        skip_body = isinstance(child, ast.If) and _is_type_checking(child.test)
        for statement in child.orelse if skip_body else [child]:  # type: ignore[attr-defined]
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                yield statement
            yield from _import_nodes(statement)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name a ``from ... import`` statement in ``module`` imports from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (self-imports left out).

    ``import a.b`` is an edge to ``a.b``; ``from a import x`` is an edge to the submodule
    ``a.x`` when there is one, else to ``a``.
    """
    modules = package_modules(package_dir)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            source = _absolute(module, path.name == "__init__.py", node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else source)
        graph[module] = {target for target in targets if target in modules} - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """For every strongly connected component of more than one module (Tarjan's algorithm): one
    cycle ``[a, b, ..., a]`` through its first module (a shortest one), and all its modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [(_cycle_through(graph, component), component) for component in sorted(components)]


def _cycle_through(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle from ``component[0]`` back to itself inside ``component``."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    way_back = [node]
                    while way_back[-1] != start:
                        way_back.append(previous[way_back[-1]])
                    return [*reversed(way_back), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` imports directly or through others -> the module importing it on a
    shortest way there."""
    via: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in via and nxt != start:
                    via[nxt] = node
                    following.append(nxt)
        frontier = following
    return via


def _path(via: dict[str, str], start: str, end: str) -> str:
    path = [end]
    while path[-1] != start:
        path.append(via[path[-1]])
    return " -> ".join(reversed(path))


def _package_of(module: str) -> str:
    """``dynid.causal.granger`` -> ``dynid.causal``; top-level modules are their own package."""
    return ".".join(module.split(".")[:2])


# -- the package -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE_DIR)


def test_no_import_cycles(graph):
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(
        f"{' -> '.join(cycle)}  (cycles join all of: {', '.join(members)})"
        for cycle, members in found
    )


def test_no_causal_method_imports_another(graph):
    """Methods share code through neutral modules (``causal.common``, ``causal.graph``,
    ``dynid.linear``), never through each other. The meta-method ``dynamic`` runs its base
    method by name through ``causal.registry``, which loads it with importlib at run time:
    that is a call by name, not an import, so it is no edge here."""
    methods = {registry.get(name).__module__ for name in registry.names()}
    assert "dynid.causal.granger" in methods and len(methods) == len(registry.names())
    offences = []
    for method in sorted(methods):
        via = reachable(graph, method)
        offences += [_path(via, method, other) for other in sorted(methods & via.keys())]
    assert not offences, "causal methods importing other methods:\n" + "\n".join(offences)


def test_layers_import_only_what_architecture_allows(graph):
    offences = []
    for module, targets in sorted(graph.items()):
        allowed = MAY_IMPORT.get(_package_of(module))
        if allowed is None:
            continue
        own = _package_of(module)
        for target in sorted(targets):
            package = _package_of(target)
            if package != own and package not in allowed | INFRASTRUCTURE:
                offences.append(f"{module} -> {target}")
    assert not offences, "imports across the layers of ARCHITECTURE.md:\n" + "\n".join(offences)


def test_nothing_imports_the_cli(graph):
    offences = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if _package_of(module) != "dynid.cli" and module not in CLI_ENTRY_POINTS
        for target in sorted(targets)
        if _package_of(target) == "dynid.cli"
    ]
    assert not offences, "only dynid.cli (and the entry point) may import dynid.cli:\n" + "\n".join(
        offences
    )


# -- the graph builder itself, on a small package written here -------------------------------------
def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_builder_counts_function_level_relative_and_submodule_imports(tmp_path):
    package = _write_package(tmp_path, {
        "pkg/__init__.py": "VERSION = '1'\n",
        "pkg/a.py": "def f():\n    from . import b\n",
        "pkg/b.py": "from pkg import c\nimport pkg.sub.helper\n",
        "pkg/c.py": "from .sub.helper import thing\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/helper.py": "from ..a import f\nfrom pkg import VERSION\nimport numpy\n",
    })
    graph = import_graph(package)
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c", "pkg.sub.helper"},
        "pkg.c": {"pkg.sub.helper"},
        "pkg.sub": set(),
        "pkg.sub.helper": {"pkg.a", "pkg"},
    }
    found = cycles(graph)
    assert found == [(["pkg.a", "pkg.b", "pkg.sub.helper", "pkg.a"],
                      ["pkg.a", "pkg.b", "pkg.c", "pkg.sub.helper"])]


def test_builder_skips_type_checking_imports_but_not_their_else(tmp_path):
    package = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": (
            "import typing\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.b import B\nif typing.TYPE_CHECKING:\n    import pkg.b\n"
        ),
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n"
                    "    from pkg import c\n",
        "pkg/c.py": "",
    })
    graph = import_graph(package)
    assert graph["pkg.a"] == set() and graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == []

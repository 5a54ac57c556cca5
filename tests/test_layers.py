"""The house's layering, checked from the code's own imports (every import, at module level or
inside a function): no package imports a higher one, and no module imports itself round a circle.

The layers, lowest first (docs/architecture.md says why):

    infra  <-  model  <-  formulations  <-  online  <-  learned  <-  solvers  <-  analysis  <-  pacopt.cli
                      hetero (beside the middle row: infra and model only)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pacopt

ROOT = Path(pacopt.__file__).parent

#: package -> the packages of pacopt it may import (besides itself).
ALLOWED = {
    "infra": set(),
    "model": {"infra"},
    "formulations": {"infra", "model"},
    "online": {"infra", "model", "formulations"},
    "learned": {"infra", "model", "online"},
    "hetero": {"infra", "model"},
    "solvers": {"infra", "model", "formulations", "online", "learned"},
    "analysis": {"infra", "model", "formulations", "online", "learned", "solvers"},
    "cli": {"infra", "model", "formulations", "online", "learned", "hetero", "solvers",
            "analysis"},
    "": set(),  # pacopt/__init__.py
}


def _module_name(path: Path) -> str:
    parts = ("pacopt", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every pacopt module -> the pacopt modules it imports (``from a import b`` counts ``a.b``
    when that is a module, else ``a``)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in modules else source)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in graph.items():
        own = _package(module)
        for target in targets:
            other = _package(target)
            if other not in (own, "") and other not in ALLOWED[own]:
                out.append(f"{module} -> {target}")
    return sorted(out)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer():
    packages = {_package(m) for m in import_graph()}
    assert packages <= set(ALLOWED), packages - set(ALLOWED)


def test_no_package_imports_a_higher_one():
    assert upward_imports(import_graph()) == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_no_private_name_crosses_modules():
    """``from pacopt.x import _name`` from another module: a private name used as an API."""
    crossing = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pacopt"):
                crossing += [f"{_module_name(path)}: {node.module}.{a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert crossing == []


def test_the_checks_catch_what_they_look_for():
    """The checks themselves: an upward arrow and a circle planted in a copy of the graph."""
    graph = {k: set(v) for k, v in import_graph().items()}
    graph["pacopt.model.graph"].add("pacopt.solvers.api")
    assert "pacopt.model.graph -> pacopt.solvers.api" in upward_imports(graph)
    graph["pacopt.model.topology"].add("pacopt.model.graph")
    graph["pacopt.model.graph"].add("pacopt.model.topology")
    assert any({"pacopt.model.graph", "pacopt.model.topology"} <= set(c)
               for c in circles(graph))

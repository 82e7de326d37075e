"""agentstore's packages stand in layers, and no import runs upward.

docs/development.md, "Where each kind of change goes": stores write, selectors
read, surfaces (API, admin, commands, integrations) stay thin. That holds only
while the layers depend downward: a store that imported a selector, or the
format module that imported a store, would tie a lower layer to a higher one
(and sooner or later into a cycle, which ``tests/test_import_graph.py``
catches). This test reads every module's imports with ``ast``, wherever they
stand — except inside ``if TYPE_CHECKING:``, which names a type for the
checker and imports nothing at run time — and fails on an import from a
higher layer than the importer's own. Modules of one layer may import each
other (the cycle test keeps that honest).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "agentstore"

#: Lowest first. A top-level module or package of ``agentstore`` not listed here
#: fails the test: a new one must be given its place.
LAYERS: list[set[str]] = [
    # Foundations: settings, errors, ids, input rules, the WAL copier, the server probe.
    {"conf", "exceptions", "ids", "validation", "walcopy", "serving", "routers"},
    # The schema and the value objects.
    {"models", "types"},
    # Statements and formats: the one door, the SQL, the agentsession format, wake-ups.
    {"db", "sql", "formats", "notify", "search"},
    # Writers.
    {"stores", "tasks", "maintenance"},
    # Readers.
    {"selectors"},
    # Surfaces.
    {
        "api",
        "admin",
        "cli",
        "management",
        "integrations",
        "runs",
        "demo",
        "templatetags",
        "asgi",
        "apps",
        "checks",
        "client",
        "migrations",
    },
]


def _layer_of(top: str) -> int:
    for n, names in enumerate(LAYERS):
        if top in names:
            return n
    raise AssertionError(f"agentstore.{top} has no layer: add it to LAYERS in {__file__}")


def _is_module(name: str) -> bool:
    return (ROOT / f"{name}.py").exists() or (ROOT / name).is_dir()


def _top(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "agentstore" or len(parts) < 2:
        return None
    return parts[1]


class _Imports(ast.NodeVisitor):
    """Every ``agentstore`` import of a module, outside ``if TYPE_CHECKING:`` blocks."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.found: list[tuple[int, str]] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        if checking:
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((node.lineno, alias.name))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            anchor = self.package
            for _ in range(node.level - 1):
                anchor = anchor.rsplit(".", 1)[0]
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            if base == "agentstore" and _is_module(alias.name):
                self.found.append((node.lineno, f"agentstore.{alias.name}"))
            else:  # a module, or a name from one (agentstore's own __init__: no layer)
                self.found.append((node.lineno, base))


def upward_imports() -> list[str]:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts)
        top = _top(module)
        if top is None or top == "__init__":
            continue
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        visitor = _Imports(package.removesuffix(".__init__"))
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        own = _layer_of(top)
        for line, target in visitor.found:
            other = _top(target)
            if other is None or other == top or other == "__init__":
                continue
            if _layer_of(other) > own:
                problems.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    return problems


def test_no_import_runs_upward() -> None:
    assert upward_imports() == []


def test_the_layer_test_sees_an_upward_import(tmp_path: Path) -> None:
    """The visitor finds the imports the test must judge, and skips typing-only ones."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from agentstore.selectors import sessions\n"
        "import agentstore.api.views\n"
        "from agentstore import admin\n"
        "if TYPE_CHECKING:\n"
        "    from agentstore.cli import transfer\n"
    )
    visitor = _Imports("agentstore.stores")
    visitor.visit(ast.parse(source))
    targets = [target for _, target in visitor.found]
    assert "agentstore.selectors" in targets
    assert "agentstore.api.views" in targets
    assert "agentstore.admin" in targets
    assert not any("cli" in target for target in targets)
    assert _layer_of("selectors") > _layer_of("stores")

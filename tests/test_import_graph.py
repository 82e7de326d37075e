"""agentstore's modules import one another without a cycle, function-level imports included.

Issue 14 found cycles hidden behind function-level imports (the agentsession
format's modules, ``stores/log.py`` ↔ ``log_follow.py``): Python tolerates
them, but they tie modules that should stand in layers (docs/development.md,
"Where each kind of change goes"). This test reads every module's imports with
``ast`` — wherever they stand in the file — and looks for a strongly connected
group (Tarjan's algorithm, iterative).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "agentstore"


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The agentstore modules ``name`` imports: a submodule when one is named, else the package."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rsplit(".", 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            targets += [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
    deps = set()
    for target in targets:
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known and target != name:
            deps.add(target)
    return deps


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Every strongly connected group of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        yield sorted(group)


def test_the_graph_is_read() -> None:
    graph = import_graph()
    # Function-level and package imports are seen (a broken reader must not pass).
    assert "agentstore.sql.tree" in graph["agentstore.stores.tree_walks"]
    assert "agentstore.sql" in graph["agentstore.sql.tasks"]
    assert len(graph) > 100


def test_no_import_cycles() -> None:
    assert list(cycles(import_graph())) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert list(cycles(graph)) == [["a", "b", "c"]]

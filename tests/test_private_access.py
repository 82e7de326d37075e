"""No private back doors: code reads or calls ``obj._name`` only where ``obj`` is its own kind.

docs/development.md: a class's underscore names are its own. Code may use
them on ``self``/``cls``/``super()``, and a method may use them on another
instance of its class family (``Session.copy`` filling the copy, a subclass
adopting its base's state) — any name the class or one of its bases defines
or assigns on ``self``. Everywhere else — another class, a module function
setting an object's private field — the owner must offer a documented way
(``Subscription(listener=…)``, the task repositories' internal API). This
test finds every such access in ``agentstore/`` by reading the source.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import agentstore

ROOT = Path(agentstore.__file__).resolve().parent

#: Underscore names that are a framework's public API by convention, and why.
FRAMEWORK = {
    "_meta": "Django's documented Model._meta API",
    "_state": "Django's Model._state (which database a row came from)",
    "_request": "DRF's Request wraps the HttpRequest as _request",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _owned_names() -> dict[tuple[str, str], set[str]]:
    """(module, class) -> the private names its body defines or its methods set on self."""
    owned: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = owned[(module, node.name)]
            for inner in ast.walk(node):
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(inner.name)
                elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                    names.add(inner.id)
                elif (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id == "self"
                ):
                    names.add(inner.attr)
    return owned


def _family_names(module: str, class_name: str, owned: dict[tuple[str, str], set[str]]) -> set[str]:
    """Private names of the class and its bases (runtime MRO; top-level classes)."""
    cls = getattr(importlib.import_module(module), class_name, None)
    if not isinstance(cls, type):
        return owned.get((module, class_name), set())
    names: set[str] = set()
    for klass in cls.__mro__:
        names |= set(vars(klass))
        names |= owned.get((klass.__module__, klass.__qualname__), set())
    return names


def back_doors(source: str, module: str, owned: dict[tuple[str, str], set[str]]) -> list[str]:
    """``line: expression`` of every private access in ``source`` its class does not own."""
    found: list[str] = []

    def visit(node: ast.AST, family: set[str] | None) -> None:
        # Iterative walk: a stack of (node, the enclosing class's names).
        stack = [(node, family)]
        while stack:
            current, names = stack.pop()
            if isinstance(current, ast.ClassDef):
                names = _family_names(module, current.name, owned)
            elif isinstance(current, ast.Attribute) and _private(current.attr):
                value = current.value
                own = (isinstance(value, ast.Name) and value.id in ("self", "cls")) or (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id == "super"
                )
                allowed = (
                    own
                    or current.attr in FRAMEWORK
                    or current.attr.startswith("_agentstore")  # our stash on Django's objects
                    or (names is not None and current.attr in names)
                )
                if not allowed:
                    found.append(f"{current.lineno}: {ast.unparse(current)}")
            stack.extend((child, names) for child in ast.iter_child_nodes(current))

    visit(ast.parse(source), None)
    return found


def test_no_code_reaches_into_another_objects_private_names() -> None:
    owned = _owned_names()
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        found = back_doors(path.read_text(encoding="utf-8"), _module_name(path), owned)
        if found:
            offenders[path.relative_to(ROOT).as_posix()] = found
    assert offenders == {}


def test_the_scan_sees_a_back_door() -> None:
    # The form notify.subscribe had: a module function setting a private field.
    source = "def subscribe(s, listener):\n    s._listener = listener\n    s._wake()\n"
    assert sorted(back_doors(source, "agentstore.notify", {})) == ["2: s._listener", "3: s._wake"]
    # Inside a class, the class's own names on another instance are fine.
    own = "class Subscription:\n    def copy(self, other):\n        other._listener = None\n"
    assert back_doors(own, "agentstore.notify", _owned_names()) == []

"""Demo data, seeded through the stores (``manage.py agentstore demo``).

One module per area, each with ``seed(owner) -> list[str]`` that creates its data
once (running it again keeps what is there) and returns lines to print::

    from agentstore.demo import seed_all
    for line in seed_all(owner):
        print(line)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["SEEDS", "seed_all"]

#: The seed modules, in order.
SEEDS = ("tree", "loop", "tasks", "log", "integrations")


def seed_all(owner: Any = None) -> list[str]:
    """Seed every area; return the lines each reported."""
    lines: list[str] = []
    for name in SEEDS:
        lines.extend(import_module(f"agentstore.demo.{name}").seed(owner))
    return lines

"""Demo data, seeded through the stores by ``manage.py demo_setup``.

One module per area (``tree.py``, ``loop.py``, ``tasks.py`` …), each with a
``seed(owner) -> list[str]`` function that creates its demo data idempotently and
returns lines to print.
"""

from __future__ import annotations

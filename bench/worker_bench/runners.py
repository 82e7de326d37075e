"""The runner ``bench/run_throughput.py`` starts: a run that does nothing."""

from __future__ import annotations

from typing import Any


def noop(run: Any) -> None:
    return None

"""The worker half of the start handshake of ``tests/processes.py``.

A worker sets itself up (``django.setup()``, a connection), then calls
:func:`ready_then_wait`: it announces it is ready with a file beside the start
file and waits for the start file. The launcher releases the workers only when
every one of them is ready, so contention starts together however slowly a
busy machine starts processes — no sleep decides when the race begins.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["ready_path", "ready_then_wait"]

#: How long a ready worker waits for the start file before giving up.
WAIT_LIMIT = 300.0


def ready_path(start_file: str | Path, pid: int) -> Path:
    """Where the worker with ``pid`` announces it is ready."""
    return Path(f"{start_file}.ready-{pid}")


def ready_then_wait(start_file: str, limit: float = WAIT_LIMIT) -> None:
    """Announce readiness, then wait for the launcher's start file (no-op without one)."""
    if not start_file:
        return
    ready_path(start_file, os.getpid()).touch()
    deadline = time.monotonic() + limit
    while not os.path.exists(start_file):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {start_file}")
        time.sleep(0.002)

"""Run worker processes that start their work at the same moment (for concurrency tests).

    results = run_together(
        database_url, [["-m", "tests.workers.writer", "--worker", "0"], …]
    )

Each command runs as ``python <command> --start-file F`` with ``DATABASE_URL`` set.
The workers set themselves up (``django.setup()``, a connection) and then wait
for the start file, so the contention starts together rather than staggered by
start-up time. Each worker prints one JSON line last; a worker that exits
non-zero fails the test with its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

__all__ = ["run_together"]


def run_together(
    database_url: str, commands: list[list[str]], *, settle: float = 1.5, timeout: float = 300
) -> list[dict[str, Any]]:
    """Start every command, release them together, return each one's last JSON line."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "project.settings"}
    with tempfile.TemporaryDirectory() as tmp:
        start_file = Path(tmp) / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, *command, "--start-file", str(start_file)],
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for command in commands
        ]
        # Let every worker finish django.setup() and connect, then start them together.
        time.sleep(settle)
        start_file.touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    return results

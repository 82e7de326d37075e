"""Settings of the run workers (``tests/runs/test_run_crash.py``): the test runners named."""

from __future__ import annotations

from project.settings import *  # noqa: F403
from tests.runs.names import RUNNERS

AGENTSTORE = {"RUNNERS": {**AGENTSTORE["RUNNERS"], **RUNNERS}}  # noqa: F405

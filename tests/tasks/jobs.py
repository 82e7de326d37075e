"""Module-level ``@task`` functions the worker tests enqueue (the framework needs module level)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from agentstore.tasks.framework import framework

assert framework is not None, "tests need django.tasks or the django-tasks backport"
task = framework.task


class Boom(Exception):
    pass


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def noop() -> None:
    return None


@task(max_attempts=3)
def flaky(marker: str, fail_times: int) -> str:
    """Fail ``fail_times`` times (counted in a file), then succeed."""
    path = Path(marker)
    count = int(path.read_text()) if path.exists() else 0
    path.write_text(str(count + 1))
    if count < fail_times:
        raise Boom(f"failure {count + 1}")
    return "ok"


@task(max_attempts=5)
def permanent() -> None:
    from agentstore.tasks.handlers import NotRetryable

    raise NotRetryable("bad input")


@task
async def async_double(x: int) -> int:
    return x * 2


@task(takes_context=True)
def with_context(context: Any, label: str) -> dict[str, Any]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}


@task(max_attempts=50)
def chaos_step(n: int) -> int:
    """Chaos test: a short piece of work (batches of them are what a kill lands on)."""
    time.sleep(0.002)
    return n


@task
def wait_to_be_killed(marker: str) -> str:
    """The first run writes its pid to ``marker`` and waits for the test to SIGKILL it."""
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        time.sleep(600)  # the test kills this process here; never reached otherwise
        return "not killed"
    return "ran again"


@task
def kill_my_worker(marker: str) -> None:
    """A poison task: every run counts itself in ``marker`` and SIGKILLs its own worker."""
    path = Path(marker)
    with path.open("a") as runs:
        runs.write(f"{os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)


@task
def returns(what: str) -> Any:
    """Return a float named by text (``"nan"``, ``"inf"``): what JSON cannot hold."""
    return float(what)

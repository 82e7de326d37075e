"""Runners by name: the callables that continue a session by one agent turn.

A *runner* takes a :class:`~agentstore.runs.execution.RunContext` and does one
agent turn (or one graph invocation) on ``run.session_id``; what it returns —
any JSON value — is the run's output. Runners are named in settings, as dotted
paths or callables::

    AGENTSTORE = {"RUNNERS": {"support": "myapp.agents.support"}}

or registered in code::

    from agentstore.runs import runner

    @runner("support")
    def support(run):
        ...

A runner may say which kind of session a run creates when it is started
without one — ``session_kind`` (``"log"``, the default: an agentsession log,
what the OpenAI Agents SDK and Pydantic AI integrations write; ``"graph"``:
a LangGraph thread) and ``harness`` (the name a new log session's header
carries). The builders of :mod:`agentstore.runs.builders` set both; a plain
function may set them as attributes.

Names follow the one rule for names (no NUL or control characters, no ``/``,
at most 64 characters). Listing the names imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from agentstore.conf import agentstore_settings
from agentstore.exceptions import ValidationError
from agentstore.models.sessions import SessionKind
from agentstore.validation import require_name

__all__ = [
    "DEFAULT_HARNESS",
    "MAX_NAME",
    "RUN_KIND",
    "Runner",
    "get_runner",
    "runner",
    "runner_names",
]

#: The task kind of a run.
RUN_KIND = "run"

#: Longest runner name (the ``RunTask.runner`` column).
MAX_NAME = 64
#: ``harness.name`` of a log session a runner that names none creates.
DEFAULT_HARNESS = "agentstore-run"
#: The kinds of session a run may create when started without one.
_CREATABLE = frozenset({SessionKind.LOG.value, SessionKind.GRAPH.value})

_registered: dict[str, Callable[..., Any]] = {}


@dataclass(frozen=True, slots=True)
class Runner:
    """A runner resolved by name: the callable and the session it creates."""

    name: str
    fn: Callable[..., Any]
    session_kind: str
    harness: str


def runner(
    name: str, *, session_kind: str | None = None, harness: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated callable as the runner ``name`` (the setting wins over it)."""
    require_name(name, "runner", MAX_NAME)

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if session_kind is not None:
            fn.session_kind = session_kind  # type: ignore[attr-defined]
        if harness is not None:
            fn.harness = harness  # type: ignore[attr-defined]
        _registered[name] = fn
        return fn

    return register


def _configured() -> dict[str, Any]:
    configured = agentstore_settings.RUNNERS
    if not isinstance(configured, dict):
        raise ImproperlyConfigured("AGENTSTORE['RUNNERS'] must map runner names to dotted paths.")
    return configured


def runner_names() -> list[str]:
    """The names of every runner (``RUNNERS`` and ``@runner``), sorted; nothing imported."""
    return sorted({*_registered, *_configured()})


def get_runner(name: str) -> Runner:
    """The runner called ``name``; ``ValidationError`` (field ``runner``) when there is none.

    ``ImproperlyConfigured`` when the setting names something that does not
    import or does not describe a runner: a deployment error, not the caller's.
    """
    require_name(name, "runner", MAX_NAME)
    configured = _configured()
    if name in configured:
        path = configured[name]
        try:
            fn = import_string(path) if isinstance(path, str) else path
        except ImportError as error:
            raise ImproperlyConfigured(
                f"AGENTSTORE['RUNNERS'][{name!r}]: cannot import {path!r}: {error}"
            ) from error
    elif name in _registered:
        fn = _registered[name]
    else:
        known = ", ".join(runner_names()) or "none is configured"
        raise ValidationError(f"no runner named {name!r} (runners: {known})", field="runner")
    if not callable(fn):
        raise ImproperlyConfigured(f"runner {name!r} is not callable: {fn!r}")
    kind = str(getattr(fn, "session_kind", SessionKind.LOG.value))
    if kind not in _CREATABLE:
        raise ImproperlyConfigured(
            f"runner {name!r}: session_kind must be one of {sorted(_CREATABLE)}, not {kind!r}"
        )
    harness = str(getattr(fn, "harness", DEFAULT_HARNESS))
    return Runner(name=name, fn=fn, session_kind=kind, harness=harness)

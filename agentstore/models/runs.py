"""Runs: one agent turn a worker executes for a session (a task of kind ``run``).

A run is a :class:`~agentstore.models.tasks.Task` whose kind is ``run``, so it
has the task's whole lifecycle — queue, lease, retries, crash recovery, its
event log — and :class:`RunTask` holds what is particular to it: which
*runner* (a callable named in ``AGENTSTORE["RUNNERS"]``) continues the session,
with which input and overrides. The session is the task's ``owner_session``:
deleting the session deletes its runs, and a run is visible exactly when its
session is. What the runner returned is the task's ``result`` (JSON).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agentstore.models.tasks import Task


class RunTask(models.Model):
    """What a run does: the runner's name, its input and its overrides."""

    task = models.OneToOneField(
        Task,
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="run",
    )
    runner = models.CharField(_("runner"), max_length=64)
    # Any JSON value: the new user message as text, a list of items, a graph's input.
    input_json = models.TextField(_("input (JSON)"), default="null")
    # A JSON object the runner may honour: {"model": …, "instructions": …}.
    overrides_json = models.TextField(_("overrides (JSON)"), default="{}")

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        constraints = [
            models.CheckConstraint(
                condition=~Q(runner=""), name="agentstore_runtask_runner_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.runner} ({self.task_id})"

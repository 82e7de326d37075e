"""Workflow runs and the agent tasks they launch.

A :class:`WorkflowRun` is a task of kind ``workflow`` plus its source (and its
hash and version), arguments and name. The agent tasks a workflow launches are
linked through :class:`WorkflowAgentTask`, keyed by the workflow node that
launched them and the invocation index of that node, so a resumed workflow finds
the agent task it already started instead of starting another::

    WorkflowAgentTask.objects.filter(workflow_id=wf).order_by("sequence")

``sequence`` is the workflow-local launch order (contiguous from 1); an agent
task belongs to at most one link.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class WorkflowRun(models.Model):
    task = models.OneToOneField(
        "agentstore.Task",
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="workflow",
    )
    name = models.CharField(_("name"), max_length=255, default="", blank=True)
    source = models.TextField(_("source"))
    source_hash = models.CharField(_("source hash"), max_length=255)
    source_version = models.CharField(_("source version"), max_length=255, default="", blank=True)
    arguments_json = models.TextField(_("arguments (JSON)"), default="{}")

    class Meta:
        verbose_name = _("workflow run")
        verbose_name_plural = _("workflow runs")
        constraints = [
            models.CheckConstraint(
                condition=~Q(source="") & ~Q(source_hash=""),
                name="agentstore_workflow_source_not_empty",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.task_id


class WorkflowAgentTask(models.Model):
    workflow = models.ForeignKey(
        WorkflowRun,
        verbose_name=_("workflow"),
        on_delete=models.CASCADE,
        related_name="agent_links",
    )
    agent_task = models.OneToOneField(
        "agentstore.AgentTask",
        verbose_name=_("agent task"),
        on_delete=models.CASCADE,
        related_name="workflow_link",
    )
    sequence = models.PositiveIntegerField(_("sequence"))
    node_key = models.CharField(_("node key"), max_length=255, default="", blank=True)
    invocation_index = models.PositiveIntegerField(_("invocation index"), default=0)
    created_at = models.DateTimeField(_("created at"))

    class Meta:
        verbose_name = _("workflow agent task")
        verbose_name_plural = _("workflow agent tasks")
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "sequence"], name="agentstore_wflink_sequence"
            ),
            models.UniqueConstraint(
                fields=["workflow", "node_key", "invocation_index"],
                name="agentstore_wflink_invocation",
            ),
            models.CheckConstraint(
                condition=Q(sequence__gte=1), name="agentstore_wflink_sequence_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node_key}[{self.invocation_index}]"

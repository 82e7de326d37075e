"""Agent-loop step traces and durable approvals (the agentloop store).

:class:`Step` rows are the trace of one loop session, ordered by insertion (the
auto-increment ``id``). ``step_index`` is stored as given and repeats by design:
the loop derives it from the size of the history window it read, so a unique
key on it would reject every write once a session outgrows the window::

    Step.objects.filter(session_id=sid).order_by("-id")[:n]   # last n, newest first

``tool_args`` is kept as the exact bytes the caller gave (or NULL).

:class:`Grant` rows are approvals: the exact question text a user said yes to,
per session. They have no foreign key on purpose — a grant must not require a
session row — and deleting a session purges them explicitly, so a stale grant
never pre-approves a later session that reuses the id. Prompts can be long, so
uniqueness is on a SHA-256 digest of the text rather than the text itself
(PostgreSQL's btree indexes cap key size).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Step(models.Model):
    session = models.ForeignKey(
        "agentstore.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="steps",
        # No index of its own: the (session, id) index starts with it and serves
        # every lookup by session (decision record 0020).
        db_index=False,
    )
    step_index = models.IntegerField(_("step index"))
    step_type = models.CharField(_("step type"), max_length=64)
    content = models.TextField(_("content"), default="", blank=True)
    tool_args = models.BinaryField(_("tool arguments"), null=True, blank=True)
    duration_ms = models.BigIntegerField(_("duration (ms)"), default=0)
    prompt_tokens = models.BigIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.BigIntegerField(_("completion tokens"), default=0)
    created_at = models.DateTimeField(_("created at"))

    class Meta:
        verbose_name = _("step")
        verbose_name_plural = _("steps")
        indexes = [models.Index(fields=["session", "id"], name="agentstore_step_session")]
        constraints = [
            models.CheckConstraint(
                condition=Q(prompt_tokens__gte=0)
                & Q(completion_tokens__gte=0)
                & Q(duration_ms__gte=0),
                name="agentstore_step_counts_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.step_type} #{self.step_index}"


class Grant(models.Model):
    session_id = models.CharField(_("session id"), max_length=255)
    prompt = models.TextField(_("prompt"))
    prompt_digest = models.CharField(_("prompt SHA-256"), max_length=64)
    granted_at = models.DateTimeField(_("granted at"))

    class Meta:
        verbose_name = _("grant")
        verbose_name_plural = _("grants")
        indexes = [
            models.Index(fields=["session_id", "granted_at"], name="agentstore_grant_session"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "prompt_digest"], name="agentstore_grant_prompt_uniq"
            ),
            models.CheckConstraint(
                condition=~Q(session_id=""), name="agentstore_grant_session_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return self.prompt[:80]

"""The one session table shared by the tree, loop and log stores.

A session is the unit agents work in. The three stores we re-implement each had
their own ``sessions`` table; here they share one, so listing, ownership, holds
and the admin work the same for all of them. Columns that only one store uses
keep their zero value for the others::

    Session.objects.of_kind(SessionKind.TREE).top_level().filter(cwd="/repo").newest_first()

* tree (librecode): ``cwd``, ``name``, ``parent_session``; ``updated_at`` follows
  the last appended entry.
* loop (agentloop): ``model``, ``system_prompt``, ``data`` (the working-memory
  snapshot, bytes or NULL), ``message_id`` and the finalize summary columns.
* log (agentsession): ``header`` (the exact JSON header line), ``superseded_by``.
* graph (a LangGraph thread, ``agentstore.integrations.langgraph``): the id is the
  ``thread_id``; its checkpoints live in ``models/checkpoints.py``.

``parent_session`` is a plain string, not a foreign key: child sessions must
survive their parent's deletion, and a parent may live in another database.
``incarnation`` is a random token drawn when the row is inserted; a ref compares
it to tell a session from one deleted and re-created under the same id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agentstore.ids import new_token

if TYPE_CHECKING:
    from typing import Self


class SessionKind(models.TextChoices):
    TREE = "tree", _("tree (entries)")
    LOOP = "loop", _("loop (steps)")
    LOG = "log", _("log (agentsession)")
    GRAPH = "graph", _("graph (LangGraph thread)")


class SessionQuerySet(models.QuerySet["Session"]):
    def of_kind(self, kind: str) -> Self:
        return self.filter(kind=kind)

    def top_level(self) -> Self:
        return self.filter(parent_session="")

    def children_of(self, parent_id: str) -> Self:
        return self.filter(parent_session=parent_id)

    def owned_by(self, user: object) -> Self:
        return self.filter(owner=user)

    def current(self) -> Self:
        """Sessions not continued in a successor."""
        return self.filter(superseded_by="")

    def newest_first(self) -> Self:
        return self.order_by("-updated_at", "-id")


class Session(models.Model):
    id = models.CharField(_("id"), max_length=255, primary_key=True)
    kind = models.CharField(
        _("kind"), max_length=8, choices=SessionKind.choices, default=SessionKind.TREE
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="agentstore_sessions",
        # The (owner, -updated_at, -id) index below serves every owner lookup.
        db_index=False,
    )
    cwd = models.TextField(_("working directory"), default="", blank=True)
    name = models.CharField(_("name"), max_length=500, default="", blank=True)
    parent_session = models.CharField(
        _("parent session"), max_length=255, default="", blank=True, db_index=False
    )
    created_at = models.DateTimeField(_("created at"))
    updated_at = models.DateTimeField(_("updated at"))
    incarnation = models.CharField(_("incarnation"), max_length=32, default=new_token)

    # agentloop session snapshot and finalize summary.
    model = models.CharField(_("model"), max_length=255, default="", blank=True)
    system_prompt = models.TextField(_("system prompt"), default="", blank=True)
    data = models.BinaryField(_("working-memory snapshot"), null=True, blank=True)
    message_id = models.CharField(_("message id"), max_length=255, default="", blank=True)
    status = models.CharField(_("status"), max_length=64, default="", blank=True)
    prompt_tokens = models.BigIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.BigIntegerField(_("completion tokens"), default=0)
    step_count = models.BigIntegerField(_("step count"), default=0)
    duration_ms = models.BigIntegerField(_("duration (ms)"), default=0)
    data_bytes_carried = models.BigIntegerField(_("data bytes carried"), default=0)

    # agentsession header and continuation.
    header = models.TextField(_("header line"), default="", blank=True)
    superseded_by = models.CharField(_("superseded by"), max_length=255, default="", blank=True)
    # The log's line count and resume state as its last append left them
    # (JSON; "" = unknown): opening a log for append reads this row, not every
    # line (docs/log-store.md, "Opening a session").
    log_head = models.TextField(_("log head"), default="", db_default="", blank=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        verbose_name = _("session")
        verbose_name_plural = _("sessions")
        indexes = [
            # A project's (cwd) or a parent's sessions are few and sorted after
            # the lookup: updated_at stays out of these two, so an append's touch
            # rewrites two indexes instead of four (decision record 0020).
            models.Index(fields=["cwd"], name="agentstore_session_cwd"),
            models.Index(fields=["parent_session"], name="agentstore_session_parent"),
            models.Index(fields=["kind", "-updated_at", "-id"], name="agentstore_session_kind_upd"),
            models.Index(fields=["-updated_at", "-id"], name="agentstore_session_updated"),
            # A user's newest sessions (the API's and the admin's list for a
            # non-staff user) read in order, without sorting all of theirs; it
            # also serves the owner foreign key, which so needs no index of its own.
            models.Index(
                fields=["owner", "-updated_at", "-id"], name="agentstore_session_owner_upd"
            ),
            models.Index(fields=["created_at"], name="agentstore_session_created"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(id=""), name="agentstore_session_id_not_empty"),
            models.CheckConstraint(
                condition=Q(kind__in=SessionKind.values), name="agentstore_session_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(prompt_tokens__gte=0)
                & Q(completion_tokens__gte=0)
                & Q(step_count__gte=0)
                & Q(duration_ms__gte=0)
                & Q(data_bytes_carried__gte=0),
                name="agentstore_session_counts_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.id or ""

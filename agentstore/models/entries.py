"""Tree entries of every session, and the parts of the messages they carry.

An :class:`Entry` is one node of a session's tree. Both tree formats share the
table:

* librecode-style entries (TreeStore): ``entry_id`` is a UUIDv7, ``line`` holds
  the entry's data JSON object (unknown keys preserved), and the message and
  metadata are projected into columns (``role``, ``content``, ``model_facing``,
  ``display``, ``tool_name``, ``operation_id`` …) that the readers filter on.
* agentsession entries (LogStore): ``entry_id`` is ``sha256:…``, ``line`` is the
  exact JSON line as written — hashes depend on it, so it is never re-encoded.

``seq`` is the 1-based position in the session (UNIQUE with the session): the
append order, the cursor of follow and pagination, and the arbiter between two
writers (the second insert at the same ``seq`` fails). ``parent_id`` names
another entry of the session by ``entry_id``, ``NULL`` for a root::

    Entry.objects.filter(session_id=sid).order_by("seq")

Compaction identity: at most one *new-style* compaction (one with an
``operation_id``) hangs off a given (session, parent) — ``NULL`` parents count as
one root — and an operation id names one row. Both are partial unique indexes,
so a race between two compactors is settled by the database.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _


class EntryQuerySet(models.QuerySet["Entry"]):
    def in_session(self, session_id: str) -> EntryQuerySet:
        return self.filter(session_id=session_id)

    def in_append_order(self) -> EntryQuerySet:
        return self.order_by("seq")

    def children_of(self, session_id: str, parent_id: str | None) -> EntryQuerySet:
        if parent_id is None:
            return self.filter(session_id=session_id, parent_id__isnull=True)
        return self.filter(session_id=session_id, parent_id=parent_id)


class Entry(models.Model):
    session = models.ForeignKey(
        "agentstore.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="entries",
        # No index of its own: the (session, seq) index starts with it and serves
        # every lookup by session (decision record 0020).
        db_index=False,
    )
    seq = models.BigIntegerField(_("sequence"))
    entry_id = models.CharField(_("entry id"), max_length=128)
    # NULL marks a root (and "no parent" must differ from any entry id).
    parent_id = models.CharField(  # noqa: DJ001
        _("parent entry id"), max_length=128, null=True, blank=True
    )
    type = models.CharField(_("type"), max_length=64)
    line = models.TextField(_("JSON"), default="{}")
    created_at = models.DateTimeField(_("created at"))

    # Message projection (role "" means the entry carries no message).
    role = models.CharField(_("role"), max_length=64, default="", blank=True)
    content = models.TextField(_("content"), default="", blank=True)
    provider = models.CharField(_("provider"), max_length=255, default="", blank=True)
    model = models.CharField(_("model"), max_length=255, default="", blank=True)
    custom_type = models.CharField(_("custom type"), max_length=255, default="", blank=True)
    summary = models.TextField(_("summary"), default="", blank=True)

    # Metadata projection (derived on append; see the TreeStore).
    tool_name = models.CharField(_("tool name"), max_length=255, default="", blank=True)
    tool_status = models.CharField(_("tool status"), max_length=16, default="", blank=True)
    tool_args_json = models.TextField(_("tool arguments"), default="", blank=True)
    token_estimate = models.BigIntegerField(_("token estimate"), default=0)
    model_facing = models.BooleanField(_("model facing"), default=False)
    display = models.BooleanField(_("displayed"), default=True)
    compaction_first_kept_entry_id = models.CharField(
        _("first kept entry"), max_length=128, default="", blank=True
    )
    compaction_tokens_before = models.BigIntegerField(_("tokens before compaction"), default=0)
    branch_from_entry_id = models.CharField(
        _("branched from entry"), max_length=128, default="", blank=True
    )
    operation_id = models.CharField(_("operation id"), max_length=255, default="", blank=True)
    # How many MessagePart rows the entry has: readers skip the parts query for
    # the (usual) plain-text messages, which matters on long branches.
    part_count = models.PositiveSmallIntegerField(_("message parts"), default=0)
    # An agentsession ``function_call`` item's call_id: the format refuses a
    # repeated one, and an append asks this index rather than every line.
    call_id = models.CharField(_("call id"), max_length=255, default="", db_default="", blank=True)
    # On a tree compaction: the provider, model and thinking level in force at
    # its parent, as a JSON array written by TreeStore, so build_context needs
    # nothing above the kept context (decision record 0027). NULL when not
    # recorded (other rows, log entries).
    compaction_settings = models.TextField(  # noqa: DJ001
        _("settings at compaction"), null=True, blank=True, default=None
    )

    objects = EntryQuerySet.as_manager()

    class Meta:
        verbose_name = _("entry")
        verbose_name_plural = _("entries")
        indexes = [
            models.Index(fields=["session", "parent_id"], name="agentstore_entry_parent"),
            models.Index(fields=["session", "created_at", "seq"], name="agentstore_entry_created"),
            models.Index(
                fields=["session", "tool_name"],
                condition=~Q(tool_name=""),
                name="agentstore_entry_tool_name",
            ),
            models.Index(
                fields=["session", "call_id"],
                condition=~Q(call_id=""),
                name="agentstore_entry_call_id",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="agentstore_entry_seq_uniq"),
            # entry_id first: the one index serves "this entry of this session"
            # (appends' parent check, walks) and "an entry by id alone" (the API,
            # the admin's search, the log store's fork origin: the same
            # agentsession hash sits in an origin and in every fork's prefix) —
            # one index write per append where two were (decision record 0020).
            models.UniqueConstraint(
                fields=["entry_id", "session"], name="agentstore_entry_entry_id_uniq"
            ),
            models.UniqueConstraint(
                fields=["operation_id"],
                condition=~Q(operation_id=""),
                name="agentstore_entry_operation_uniq",
            ),
            models.UniqueConstraint(
                F("session"),
                Coalesce("parent_id", Value("")),
                condition=Q(type="compaction") & ~Q(operation_id=""),
                name="agentstore_entry_compaction_parent_uniq",
            ),
            models.CheckConstraint(condition=Q(seq__gte=1), name="agentstore_entry_seq_positive"),
            models.CheckConstraint(
                condition=~Q(entry_id=""), name="agentstore_entry_entry_id_not_empty"
            ),
            models.CheckConstraint(condition=~Q(type=""), name="agentstore_entry_type_not_empty"),
            models.CheckConstraint(
                condition=Q(token_estimate__gte=0) & Q(compaction_tokens_before__gte=0),
                name="agentstore_entry_counts_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.entry_id}"


class PartType(models.TextChoices):
    TEXT = "text", _("text")
    IMAGE = "image", _("image")


class MessagePart(models.Model):
    """One text or image part of a message-carrying entry, in order."""

    entry = models.ForeignKey(
        Entry,
        verbose_name=_("entry"),
        on_delete=models.CASCADE,
        related_name="parts",
        # No index of its own: the unique (entry, sequence) starts with it and
        # serves every lookup by entry — the parts of a page of entries, the
        # cascade, the deletes (decision record 0020, as for the entry's session).
        db_index=False,
    )
    sequence = models.PositiveIntegerField(_("sequence"))
    type = models.CharField(_("type"), max_length=8, choices=PartType.choices)
    text = models.TextField(_("text"), default="", blank=True)
    mime_type = models.CharField(_("MIME type"), max_length=255, default="", blank=True)
    name = models.CharField(_("name"), max_length=255, default="", blank=True)
    width = models.PositiveIntegerField(_("width"), default=0)
    height = models.PositiveIntegerField(_("height"), default=0)
    data = models.BinaryField(_("data"), null=True, blank=True)

    class Meta:
        verbose_name = _("message part")
        verbose_name_plural = _("message parts")
        indexes = [
            # context_has_image_parts walks a branch asking "any image here?".
            models.Index(fields=["entry"], condition=Q(type="image"), name="agentstore_part_image"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["entry", "sequence"], name="agentstore_part_seq_uniq"),
            models.CheckConstraint(
                condition=Q(type__in=PartType.values), name="agentstore_part_type_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} part {self.sequence}"

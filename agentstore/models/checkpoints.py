"""LangGraph checkpoints: a graph thread's saved states, their channel blobs and pending writes.

A LangGraph *thread* is an agentstore :class:`~agentstore.models.Session` of kind
``graph`` (its id is the ``thread_id``), so threads are owned, listed, pruned and
deleted like every other session. Inside a thread, rows are addressed the way
LangGraph addresses them: a checkpoint namespace (``""`` for the root graph,
``"node:task"`` for a subgraph call) and a checkpoint id (a time-ordered UUIDv6,
so "latest" is the largest id)::

    Checkpoint.objects.filter(session_id=tid, checkpoint_ns="").order_by("-checkpoint_id")[:1]

* :class:`Checkpoint` — one saved super-step: the serialized checkpoint *without*
  its channel values, its metadata (plain JSON, filterable), the channel versions
  it reads (plain JSON, so pruning needs no deserializing), the parent
  checkpoint id, and its *small* channel values (``inline``: ``None``, booleans,
  numbers, short strings, cleared channels — the saver decides, as LangGraph's
  ``PostgresSaver`` keeps primitives in its checkpoint row). Parent links form a
  tree: time travel forks it.
* :class:`CheckpointBlob` — one channel's (larger) value at one version, written
  once and shared by every checkpoint that reads that version (a long conversation
  does not rewrite unchanged channels at every step). Versions carry a random
  suffix (``AgentStoreSaver.get_next_version``) so a fork never collides with the
  branch it forked from.
* :class:`CheckpointWrite` — a pending write of a task in the super-step after a
  checkpoint (its outputs, an error, an interrupt, a resume value).

Values are stored exactly as the saver's serializer produced them: a ``type`` tag
and the bytes (``SerializerProtocol.dumps_typed``). agentstore never pickles or
re-encodes them. docs/integrations/langgraph.md describes the saver.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

# The three tables address their rows the way LangGraph does: thread, namespace,
# then the row's own key. Built by these helpers so the three agree.


def _thread(related_name: str) -> models.ForeignKey[Any, Any]:
    """The thread a row belongs to: its ``graph`` session (the row goes with it).

    No index of its own: every table's unique key starts with the session, so
    that index serves lookups and cascades by thread, and a second one would
    only cost each ``put`` another b-tree page to write (decision record 0020).
    """
    return models.ForeignKey(
        "agentstore.Session",
        verbose_name=_("thread"),
        on_delete=models.CASCADE,
        related_name=related_name,
        db_index=False,
    )


class RowidField(models.BigAutoField):  # type: ignore[type-arg]
    """A ``BigAutoField`` that on SQLite is the plain rowid, without ``AUTOINCREMENT``.

    ``AUTOINCREMENT`` makes every insert transaction rewrite a page of
    ``sqlite_sequence`` (one more WAL frame per ``put_writes``); it only buys
    ids never reused after the newest row is deleted. Blob and write ids are
    nobody's position (follow pages checkpoints by ``Checkpoint.id``, which
    keeps ``AUTOINCREMENT``), so these two tables do without (decision record 0022).
    PostgreSQL is unchanged (an identity column).
    """

    def db_type_suffix(self, connection: Any) -> str | None:
        if connection.vendor == "sqlite":
            return None
        suffix: str | None = super().db_type_suffix(connection)
        return suffix


def _namespace() -> models.TextField[str, str]:
    """``""`` for the root graph, ``"node:task"`` for a subgraph call."""
    return models.TextField(_("checkpoint namespace"), default="", blank=True)


def _unique_in_namespace(name: str, *key: str) -> models.UniqueConstraint:
    """UNIQUE (thread, namespace, *key): a row's key within its thread and namespace."""
    return models.UniqueConstraint(fields=["session", "checkpoint_ns", *key], name=name)


class Checkpoint(models.Model):
    session = _thread("checkpoints")
    checkpoint_ns = _namespace()
    checkpoint_id = models.CharField(_("checkpoint id"), max_length=64)
    # NULL for a root, as LangGraph has it ("" would be a checkpoint id).
    parent_checkpoint_id = models.CharField(  # noqa: DJ001
        _("parent checkpoint id"), max_length=64, null=True, blank=True
    )
    type = models.CharField(_("serializer type"), max_length=64)
    checkpoint = models.BinaryField(_("checkpoint (without channel values)"))
    metadata = models.JSONField(_("metadata"), default=dict)
    channel_versions = models.JSONField(_("channel versions"), default=dict)
    # A projection of metadata["run_id"], indexed for delete_for_runs.
    run_id = models.CharField(_("run id"), max_length=255, default="", blank=True)
    # The checkpoint's small channel values, packed by the store
    # (``stores/checkpoints.py``): read with the row, no blob lookup, no blob row.
    inline = models.BinaryField(_("small channel values"), default=b"", blank=True)
    created_at = models.DateTimeField(_("stored at"))

    class Meta:
        verbose_name = _("checkpoint")
        verbose_name_plural = _("checkpoints")
        indexes = [
            models.Index(
                fields=["run_id"], condition=~Q(run_id=""), name="agentstore_checkpoint_run"
            ),
            # The admin draws a thread's tree in insertion order.
            models.Index(fields=["session", "id"], name="agentstore_checkpoint_session"),
        ]
        constraints = [
            # Also the index of "latest in a namespace" (ORDER BY checkpoint_id DESC
            # LIMIT 1) and of list's before/limit pages: no history scans.
            _unique_in_namespace("agentstore_checkpoint_uniq", "checkpoint_id"),
            models.CheckConstraint(
                condition=~Q(checkpoint_id=""), name="agentstore_checkpoint_id_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return self.checkpoint_id


class CheckpointBlob(models.Model):
    id = RowidField(primary_key=True, serialize=False, verbose_name="ID")
    session = _thread("checkpoint_blobs")
    checkpoint_ns = _namespace()
    channel = models.TextField(_("channel"))
    version = models.CharField(_("version"), max_length=255)
    type = models.CharField(_("serializer type"), max_length=64)
    # NULL with type "empty": the channel was cleared at this version.
    blob = models.BinaryField(_("value"), null=True, blank=True)

    class Meta:
        verbose_name = _("checkpoint blob")
        verbose_name_plural = _("checkpoint blobs")
        constraints = [
            # Version before channel: the channels a super-step updates share
            # its new version, so one put's blobs are neighbours in the index
            # (one leaf page) instead of one page per channel (decision record 0067).
            _unique_in_namespace("agentstore_checkpoint_blob_uniq", "version", "channel")
        ]

    def __str__(self) -> str:
        return f"{self.channel}@{self.version}"


class CheckpointWrite(models.Model):
    id = RowidField(primary_key=True, serialize=False, verbose_name="ID")
    session = _thread("checkpoint_writes")
    checkpoint_ns = _namespace()
    checkpoint_id = models.CharField(_("checkpoint id"), max_length=64)
    task_id = models.CharField(_("task id"), max_length=255)
    task_path = models.TextField(_("task path"), default="", blank=True)
    # Position in the task's write list; special channels (error, interrupt,
    # resume, scheduled) use LangGraph's negative WRITES_IDX_MAP slots.
    idx = models.IntegerField(_("index"))
    channel = models.TextField(_("channel"))
    type = models.CharField(_("serializer type"), max_length=64)
    blob = models.BinaryField(_("value"))

    class Meta:
        verbose_name = _("checkpoint write")
        verbose_name_plural = _("checkpoint writes")
        constraints = [
            _unique_in_namespace(
                "agentstore_checkpoint_write_uniq", "checkpoint_id", "task_id", "idx"
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_id}[{self.idx}] → {self.channel}"

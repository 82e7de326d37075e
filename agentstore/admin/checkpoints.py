"""Admins of the LangGraph tables: checkpoints, channel blobs and pending writes.

The changelists are for finding rows (by thread, namespace, checkpoint id, run);
the thread page (``session/<thread id>/checkpoints/``, see ``admin/sessions.py``)
is where a thread is read: its checkpoint tree, the decoded state and writes.
Serialized values (bytes) are never rendered here, only their type and size.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore.admin.mixins import ReadOnlyAdmin, clip
from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite

__all__ = ["CheckpointAdmin", "CheckpointBlobAdmin", "CheckpointWriteAdmin"]


def thread_link(session_id: str, checkpoint_ns: str, checkpoint_id: str = "") -> str:
    url = reverse("admin:agentstore_session_checkpoints", args=[quote(session_id)])
    query = f"?ns={quote(checkpoint_ns)}" + (
        f"&checkpoint={checkpoint_id}" if checkpoint_id else ""
    )
    return format_html('<a href="{}{}">{}</a>', url, query, clip(session_id, 24))


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "created_at",
    )
    search_fields = ("=session__id", "=checkpoint_id", "=run_id")
    raw_id_fields = ("session",)
    exclude = ("checkpoint",)
    ordering = ("-id",)

    @admin.display(description=_("thread"))
    def thread(self, obj: Checkpoint) -> str:
        return thread_link(obj.session_id, obj.checkpoint_ns, obj.checkpoint_id)


@admin.register(CheckpointBlob)
class CheckpointBlobAdmin(ReadOnlyAdmin):
    list_display = ("id", "session_id", "checkpoint_ns", "channel", "version", "type")
    search_fields = ("=session__id", "=channel")
    raw_id_fields = ("session",)
    exclude = ("blob",)
    ordering = ("-id",)


@admin.register(CheckpointWrite)
class CheckpointWriteAdmin(ReadOnlyAdmin):
    list_display = ("id", "session_id", "checkpoint_id", "task_id", "idx", "channel", "type")
    search_fields = ("=session__id", "=checkpoint_id", "=task_id")
    raw_id_fields = ("session",)
    exclude = ("blob",)
    ordering = ("-id",)

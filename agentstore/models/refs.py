"""Refs: mutable, store-level names for a session (and optionally a pinned entry).

A :class:`Ref` is changed only by compare-and-swap (``RefStore.update_ref``, which
``LogStore.update_ref`` delegates to) and outlives the session it names — there is
deliberately no foreign key, so a ref to a deleted session is *dangling* rather
than gone. ``target_incarnation`` remembers which incarnation of the session the
ref was set to, so a session deleted and re-created under the same id still reads
as dangling.

Every successful change appends a :class:`RefLog` row (old → new, when, why);
the log survives deletion of the ref::

    RefLog.objects.filter(name="team/main").order_by("-id")

``Ref.name`` is a :class:`ByteOrderCharField`: on PostgreSQL its column (and so
the primary-key index) has the ``"C"`` collation, byte order, which is what
SQLite's ``BINARY`` default already is. Listings page by name and filter
prefixes as ranges (:mod:`agentstore.stores.ref_queries`); with a locale's collation
that order would be neither SQLite's nor one the index could serve
(decision record 0013).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    _CharField = models.CharField[str, str]
else:
    _CharField = models.CharField


class ByteOrderCharField(_CharField):
    """A ``CharField`` whose PostgreSQL column is ``COLLATE "C"`` (byte order; SQLite's already is).

    ``db_collation`` cannot be used: SQLite has no ``"C"`` collation and the
    model serves both databases, so the collation is chosen per connection here.
    """

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        params: dict[str, Any] = super().db_parameters(connection)
        if connection.vendor == "postgresql":
            params["collation"] = "C"
        return params


class Ref(models.Model):
    name = ByteOrderCharField(_("name"), max_length=200, primary_key=True)
    session_id = models.CharField(_("session id"), max_length=255)
    entry_id = models.CharField(_("pinned entry id"), max_length=128, default="", blank=True)
    target_incarnation = models.CharField(
        _("session incarnation"), max_length=32, default="", blank=True
    )
    updated_at = models.DateTimeField(_("updated at"))

    class Meta:
        verbose_name = _("ref")
        verbose_name_plural = _("refs")
        indexes = [
            models.Index(fields=["session_id"], name="agentstore_ref_session"),
            # The creation rules' probes (selectors.refs.clash_candidates): names
            # by their lower-cased spelling, so a new name is checked in a few
            # seeks instead of a read of every name.
            models.Index(Lower("name"), name="agentstore_ref_folded"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(name=""), name="agentstore_ref_name_not_empty"),
            models.CheckConstraint(
                condition=~Q(session_id=""), name="agentstore_ref_session_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class RefLog(models.Model):
    name = models.CharField(_("ref name"), max_length=200)
    old_session = models.CharField(_("old session"), max_length=255, default="", blank=True)
    old_entry = models.CharField(_("old entry"), max_length=128, default="", blank=True)
    new_session = models.CharField(_("new session"), max_length=255, default="", blank=True)
    new_entry = models.CharField(_("new entry"), max_length=128, default="", blank=True)
    at = models.DateTimeField(_("at"))
    reason = models.TextField(_("reason"), default="", blank=True)

    class Meta:
        verbose_name = _("ref log entry")
        verbose_name_plural = _("ref log")
        indexes = [models.Index(fields=["name", "id"], name="agentstore_reflog_name")]

    def __str__(self) -> str:
        return f"{self.name}: {self.old_session or '∅'} → {self.new_session or '∅'}"

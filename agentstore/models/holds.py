"""Cross-process holds: which store (process) has a session open for writing.

At most one :class:`Holder` row per session. A store claims it in the same
transaction that creates or opens the session, refreshes ``heartbeat`` on every
append (a zero-row heartbeat update is how a writer learns its hold was broken or
taken), and deletes it on release. There is no time-based expiry: a holder whose
process is dead on this host is taken over; one on another host is removed by an
operator (``break_lock``). Holds apply to every kind of session, so the API,
admin and commands can show and break them.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Holder(models.Model):
    session = models.OneToOneField(
        "agentstore.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="holder",
    )
    pid = models.IntegerField(_("process id"))
    host = models.CharField(_("host"), max_length=255)
    token = models.CharField(_("store token"), max_length=64)
    since = models.DateTimeField(_("held since"))
    heartbeat = models.DateTimeField(_("last append"))

    class Meta:
        verbose_name = _("hold")
        verbose_name_plural = _("holds")

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"

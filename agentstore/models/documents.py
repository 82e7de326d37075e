"""Runtime documents: small JSON values addressed by (namespace, key).

``value_json`` is kept as the text the caller gave (any JSON shape), so a reader
gets back exactly what was written; the DocumentStore validates it on the way in.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Document(models.Model):
    namespace = models.CharField(_("namespace"), max_length=255)
    key = models.CharField(_("key"), max_length=255, db_column="document_key")
    value_json = models.TextField(_("value (JSON)"), default="{}")
    updated_at = models.DateTimeField(_("updated at"))

    class Meta:
        verbose_name = _("document")
        verbose_name_plural = _("documents")
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="agentstore_document_uniq"),
            models.CheckConstraint(
                condition=~Q(namespace="") & ~Q(key=""), name="agentstore_document_key_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.key}"

"""Token authentication with one hand-written query per request.

DRF's ``TokenAuthentication`` builds and compiles an ORM query (token joined to
its user, every column of both) on every request; on the append hot path that
was a third of a request's CPU time. This subclass runs the same lookup as one
prepared statement that loads only what authorization needs (the user's key,
username, ``is_active``, ``is_staff``); any other user field is loaded lazily on
first access, like a deferred queryset field. The statement is
:func:`agentstore.sql.auth.token_lookup`'s (built from the models' ``_meta``,
like all raw SQL). Same tokens, same errors, same
``request.auth``::

    REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "agentstore.api.authentication.TokenAuthentication",
            "rest_framework.authentication.SessionAuthentication",
        ],
    }
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import router
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from agentstore import db
from agentstore.sql import auth as auth_sql

__all__ = ["TokenAuthentication"]


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication, looked up with one lean statement."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        token_model = self.get_model()
        user_model = get_user_model()
        statement, names = auth_sql.token_lookup(token_model, user_model)
        alias = router.db_for_read(token_model)
        with db.cursor(alias) as cursor:
            cursor.execute(statement, [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        user = user_model.from_db(alias, names, row)
        if not getattr(user, "is_active", True):
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        token = token_model.from_db(alias, ["key", "user_id"], [key, user.pk])
        token.user = user  # type: ignore[attr-defined]
        return user, token

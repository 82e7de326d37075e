"""The raw SQL of the API's token authentication (``agentstore.api.authentication``).

One statement per request looks a DRF token up joined to its user, loading
only what authorization needs. The tables are not agentstore's — DRF's token
model and the project's user model, whichever ``AUTH_USER_MODEL`` names — so
the statement is built from the models it is given, once per pair, and every
table and column name comes from their ``_meta``. Names are quoted the
SQL-standard way (SQLite and PostgreSQL alike): the token's ``key`` column is
a reserved word, and a custom user model's columns are not ours to vet.
"""

from __future__ import annotations

from functools import cache

from django.db.models import Field, Model

__all__ = ["token_lookup"]

#: The user attributes authorization reads (those the user model has).
USER_FIELDS = ("is_active", "is_staff", "is_superuser")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _column(model: type[Model], name: str) -> str:
    """The quoted column of field ``name`` (``LookupError`` for a relation that has none)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise LookupError(f"{model.__name__}.{name} is not a column")
    return _quoted(str(field.column))


@cache
def token_lookup(token_model: type[Model], user_model: type[Model]) -> tuple[str, list[str]]:
    """The token look-up and the user attribute names it loads, in the row's order.

    Param: the token key. The row is the user's primary key, username field and
    :data:`USER_FIELDS` in the model's field order (``Model.from_db`` expects
    it); a custom user model may lack some of them.
    """
    user_meta, token_meta = user_model._meta, token_model._meta
    assert user_meta.pk is not None  # a concrete model always has one
    wanted = {user_meta.pk.attname, getattr(user_model, "USERNAME_FIELD", ""), *USER_FIELDS}
    loaded = [f for f in user_meta.concrete_fields if f.attname in wanted]
    columns = ", ".join(f"u.{_quoted(str(f.column))}" for f in loaded)
    statement = (
        f"SELECT {columns} FROM {_quoted(token_meta.db_table)} t "
        f"JOIN {_quoted(user_meta.db_table)} u "
        f"ON u.{_quoted(str(user_meta.pk.column))} = t.{_column(token_model, 'user')} "
        f"WHERE t.{_column(token_model, 'key')} = %s"
    )
    return statement, [f.attname for f in loaded]

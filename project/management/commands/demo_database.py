"""Make sure the demo's database exists before it is migrated: create it, or say what to do.

    python manage.py demo_database        # ./scripts/demo runs it before migrate

SQLite creates its file on the first connection; this only makes the file's
directory. PostgreSQL does not create a database a URL names::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/nonexistent ./scripts/demo

failed in ``migrate`` with a traceback. Here the database is created when it is
missing (``CREATE DATABASE``, connected to the server's ``postgres``
maintenance database with the same host, port, user and password), and
anything that stops that — the server is down, the password is wrong, the user
may not create databases — ends the command with one line saying what is wrong
and what to do (``CommandError``: exit status 1, no traceback).

Missing is decided by the catalogue (``pg_database``), not by the text of the
connection error, which the server words in its own language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

#: The database every PostgreSQL server has, to connect to when the target is missing.
MAINTENANCE_DB = "postgres"


def _first_line(error: BaseException) -> str:
    text = " ".join(str(error).split("\n", 1)[0].split())
    return text.removeprefix("connection failed: ") or type(error).__name__


class Command(BaseCommand):
    help = "Create the demo's database if it does not exist (PostgreSQL), or say what to do."

    requires_system_checks: Any = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="(default: %(default)r)")

    def handle(self, *args: Any, database: str, **options: Any) -> None:
        connection = connections[database]
        if connection.vendor == "sqlite":
            name = str(connection.settings_dict["NAME"])
            if name != ":memory:" and not name.startswith("file:"):
                Path(name).parent.mkdir(parents=True, exist_ok=True)
            return
        if connection.vendor != "postgresql":
            return
        self.stdout.write(_ensure_postgres(connection))


def _ensure_postgres(connection: Any) -> str:
    """Connect to the database, creating it first when it is missing; return what was done."""
    import psycopg
    from psycopg import sql

    params = dict(connection.get_connection_params())
    params.pop("cursor_factory", None)  # Django's; psycopg.connect takes no such argument
    params.setdefault("connect_timeout", 10)
    name = str(params.get("dbname") or connection.settings_dict["NAME"])
    where = (
        f"{params.get('host') or 'the local socket'}"
        f"{':' + str(params['port']) if params.get('port') else ''}"
    )
    user = params.get("user") or "(default user)"
    try:
        psycopg.connect(**params).close()
        return f"PostgreSQL database {name!r} on {where}: exists"
    except psycopg.OperationalError as error:
        first = error
    try:
        server = psycopg.connect(**{**params, "dbname": MAINTENANCE_DB}, autocommit=True)
    except psycopg.Error as error:
        raise CommandError(
            f"cannot connect to PostgreSQL on {where} as {user}: {_first_line(error)}. "
            f"Start the server or fix DATABASE_URL (user, password, host, port)."
        ) from None
    with server:
        found = server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if found is not None:
            raise CommandError(
                f"cannot connect to PostgreSQL database {name!r} on {where} as {user}: "
                f"{_first_line(first)}. Check the user's access to it (GRANT CONNECT, "
                f"pg_hba.conf) or fix DATABASE_URL."
            )
        try:
            server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as error:
            raise CommandError(
                f"PostgreSQL database {name!r} does not exist on {where} and {user} cannot "
                f"create it: {_first_line(error)}. Create it as a user who may (createdb "
                f"{name}), or point DATABASE_URL at an existing database."
            ) from None
    return f"Created PostgreSQL database {name!r} on {where}"

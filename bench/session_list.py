"""A user's newest sessions, as every surface lists them, beside the raw query's floor.

    .venv/bin/python bench/session_list.py                          # SQLite, 100k sessions
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentstore_bench_list \\
        .venv/bin/python bench/session_list.py                      # PostgreSQL

Seeds ``--sessions`` sessions (set based: one ``INSERT … SELECT``) owned by
``--users`` users, one of whom — the one measured — owns a tenth of them,
written long ago, while the others keep writing (their sessions are the
newest): the shape in which a list ordered by ``updated_at`` and filtered by
owner goes wrong without an index that starts with the owner. Then, ``--repeats``
times each:

* ``agentstore`` — ``sessions_visible_to(user).newest_first()[:50]`` evaluated
  to model instances (the selector the REST API's ``GET /sessions`` and the admin
  start from; ``only`` the list's columns, as the API serializer reads them);
* ``raw`` — the same 50 rows' columns by the driver itself (``sqlite3`` or
  psycopg), no ORM: the floor.

Prints the medians and the ratio; never asserts. The query plan of the raw
statement is printed too (it must walk the owner's index, not sort).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

COLUMNS = ("id", "kind", "name", "cwd", "created_at", "updated_at", "owner_id", "superseded_by")


def seed(sessions: int, users: int) -> int:
    """Seed the rows; return the measured user's id."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agentstore import sql
    from agentstore.models import Session

    model = get_user_model()
    owners = [model.objects.create_user(f"user{n}") for n in range(users)]
    table = Session._meta.db_table
    first = owners[0].pk
    # Session n: the measured user's are the oldest tenth; the rest cycle over the others.
    mine = sessions // 10
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            series = f"SELECT g AS n FROM generate_series(1, {sessions}) AS g"
            stamp = "TIMESTAMPTZ '2026-01-01' + make_interval(secs => n)"
        else:
            series = (
                f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
                f"WHERE n < {sessions}) SELECT n FROM s"
            )
            stamp = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', '2026-01-01', '+' || n || ' seconds')"
        others = f"{first} + 1 + (n %% {users - 1})"
        # Every column from _meta: the computed ones per n, the rest the model's defaults.
        computed = {
            "id": "'sess-' || n",
            "kind": "'tree'",
            "created_at": stamp,
            "updated_at": stamp,
            "name": "'n' || n",
            "owner_id": f"CASE WHEN n <= {mine} THEN {first} ELSE {others} END",
            "incarnation": "'i' || n",
        }
        names = sql.column_names(Session)
        defaults = sql.row(Session, id="", created_at=None, updated_at=None)
        exprs, params = [], []
        for name, default in zip(names, defaults, strict=True):
            if name in computed:
                exprs.append(computed[name])
            else:
                exprs.append("%s")
                params.append(default)
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(names)}) "
            f"SELECT {', '.join(exprs)} FROM ({series}) AS seq",
            params,
        )
    return int(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2_000)
    common.add_json_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = common.database_url(tmp, "list.sqlite3")
        if common.engine(url) == "postgresql":
            common.ensure_postgres_database(url, fresh=True)
        common.setup_django(url)
        run(args)


def run(args: argparse.Namespace) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agentstore.models import Session
    from agentstore.selectors.sessions import sessions_visible_to

    owner_id = seed(args.sessions, args.users)
    user = get_user_model().objects.get(pk=owner_id)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if connection.vendor == "sqlite" else "ANALYZE agentstore_session")
    table = Session._meta.db_table
    mark = "%s"
    raw_sql = (
        f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE owner_id = {mark} "
        "ORDER BY updated_at DESC, id DESC LIMIT 50"
    )
    raw_conn = connection.connection if connection.connection else None
    connection.ensure_connection()
    raw_conn = connection.connection
    if connection.vendor == "sqlite":
        plan_sql, raw_text = "EXPLAIN QUERY PLAN " + raw_sql, raw_sql.replace("%s", "?")
        plan = raw_conn.execute(plan_sql.replace("%s", "?"), [owner_id]).fetchall()

        def raw() -> object:
            return raw_conn.execute(raw_text, [owner_id]).fetchall()
    else:
        with raw_conn.cursor() as cur:
            cur.execute("EXPLAIN " + raw_sql, [owner_id])
            plan = cur.fetchall()

        def raw() -> object:
            with raw_conn.cursor() as cur:
                cur.execute(raw_sql, [owner_id])
                return cur.fetchall()

    def selector() -> object:
        return list(sessions_visible_to(user).newest_first().only(*COLUMNS)[:50])

    assert len(selector()) == len(raw())  # type: ignore[arg-type]  # the same rows
    figures = {}
    plan_of = (("raw", raw), ("agentstore", selector)) * 2
    for name, call in plan_of:
        samples = common.timed(call, args.repeats, warmups=50)
        figures[name] = min(figures.get(name, 1e9), common.median_ms(samples))
    load = common.machine()["load_average"]
    print(f"{connection.vendor}: {args.sessions:,} sessions, {args.users} users; load {load}")
    print("plan of the raw statement:")
    for row in plan:
        print("   ", row)
    ratio = figures["agentstore"] / figures["raw"]
    print(f"  raw        {figures['raw']:.3f} ms")
    print(f"  agentstore {figures['agentstore']:.3f} ms   {ratio:.2f}x the floor")
    common.record("newest 50 sessions of a user", "raw", figures["raw"], role="raw", unit="ms")
    common.record("newest 50 sessions of a user", "agentstore", figures["agentstore"], unit="ms")
    common.emit("session_list", args, engine_name=connection.vendor)


if __name__ == "__main__":
    main()

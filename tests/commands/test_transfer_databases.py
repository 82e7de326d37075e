"""Moving loop sessions and LangGraph threads between two databases with export and import.

docs/operations.md ("Scaling out") names export/import as the way from SQLite to
PostgreSQL. Here a second database, a fresh SQLite file with agentstore's tables,
sits beside the suite's own: on the PostgreSQL run this is the real move, SQLite
→ PostgreSQL → SQLite; on the SQLite run the same code between two SQLite files.
Every stored field is compared after each leg.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connections
from django.db.utils import load_backend

from agentstore.stores import SessionStore
from project.database_url import sqlite_database
from tests.commands.test_transfer import graph_thread, loop_session, rows_of, run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sqlite_other(tmp_path: Path, transactional_db: None) -> Iterator[str]:
    """A SQLite file database with agentstore's tables under the alias ``sqlite_other``.

    Made directly (not through settings.DATABASES), so Django's test case
    counts it as a dynamically created connection, which tests may use.
    """
    config = connections.configure_settings(
        {"default": {}, "sqlite_other": sqlite_database(tmp_path / "other.sqlite3")}
    )["sqlite_other"]
    wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, alias="sqlite_other")
    connections._connections.sqlite_other = wrapper  # type: ignore[attr-defined]
    try:
        # The models' tables, made straight from them: ~50 times faster than
        # ``migrate`` of every app, and loop and graph rows need nothing else
        # (no search triggers: those are the tree entries').
        with wrapper.schema_editor() as editor:
            for label in ("contenttypes", "auth", "agentstore"):
                for model in apps.get_app_config(label).get_models():
                    editor.create_model(model)
        yield "sqlite_other"
    finally:
        wrapper.close()
        delattr(connections._connections, "sqlite_other")  # type: ignore[attr-defined]


def test_sqlite_to_the_suite_database_and_back(sqlite_other: str, tmp_path: Path) -> None:
    # Seed the SQLite file: build on the suite's database, move the files over
    # the same path the user would (export, import --database), then clear here.
    sid, tid = loop_session("moved-loop", steps=7), graph_thread()
    first = tmp_path / "first"
    run("export", sid, tid, "--out", str(first))
    for key in (sid, tid):
        SessionStore().delete(key)
    run("import", *(str(first / f"{key}.jsonl") for key in (sid, tid)), "--database", sqlite_other)
    original = {key: rows_of(key, sqlite_other) for key in (sid, tid)}
    assert original[sid]["steps"] and original[tid]["checkpoints"]

    # SQLite → the suite's database (PostgreSQL on the PostgreSQL run).
    there = tmp_path / "there"
    _, err = run("export", sid, tid, "--out", str(there), "--database", sqlite_other)
    assert "[2/2] · exported" in err
    run("import", *(str(there / f"{key}.jsonl") for key in (sid, tid)))
    for key in (sid, tid):
        assert rows_of(key) == original[key], key

    # And back into a cleared SQLite file.
    back = tmp_path / "back"
    run("export", sid, tid, "--out", str(back))
    for key in (sid, tid):
        SessionStore(using=sqlite_other).delete(key)
    run("import", *(str(back / f"{key}.jsonl") for key in (sid, tid)), "--database", sqlite_other)
    for key in (sid, tid):
        assert rows_of(key, sqlite_other) == original[key], key

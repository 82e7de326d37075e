"""The loop store's per-step paths outside a test transaction, as a loop runs them.

``LoopStore.append`` is one body for ``agentstore.db.write``: the session is
touched by one narrow ``UPDATE`` once it exists, and the first step creates it
through the upsert; ``last_n`` is one statement on the door's cursor. These
tests run outside a test transaction (``transaction=True``), where the driver
opens the transaction itself, and check what is stored and read back (watched
or not), that an id of another kind is refused with nothing written, that a
watcher sees every statement, and that the steps read back are the
dataclass's own values.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.db import watched
from agentstore.models import Session, Step
from agentstore.stores import LoopStore, TreeStore
from agentstore.types import RunStep

pytestmark = pytest.mark.django_db(transaction=True)

BASE = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """Advances a second at every call."""

    def __init__(self) -> None:
        self.now = BASE

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def step(sid: str, index: int, **fields: Any) -> RunStep:
    values: dict[str, Any] = {"step_type": "response", "content": f"step {index}"}
    values.update(fields)
    return RunStep(session_id=sid, step_index=index, **values)


def test_appends_create_then_touch_the_session_and_read_back() -> None:
    store = LoopStore(clock=Clock())
    assert not watched(connection)
    store.append(step("s", 0, tool_args=b'{"a":1}', duration_ms=5, prompt_tokens=7))
    created = Session.objects.get(pk="s")
    assert created.kind == "loop"
    assert created.created_at == created.updated_at
    stamped = BASE + timedelta(hours=1)
    store.append(step("s", 1, created_at=stamped))
    store.append(step("s", 1))  # step_index repeats by design
    touched = Session.objects.get(pk="s")
    assert touched.created_at == created.created_at
    assert touched.updated_at > created.updated_at
    assert touched.incarnation == created.incarnation  # the touch is no re-insert
    got = store.last_n("s", 2)
    assert [(s.step_index, s.content) for s in got] == [(1, "step 1"), (1, "step 1")]
    assert got[0].created_at == stamped
    everything = store.steps("s")
    assert [s.step_index for s in everything] == [0, 1, 1]
    first = everything[0]
    assert first.tool_args == b'{"a":1}'
    assert (first.duration_ms, first.prompt_tokens, first.completion_tokens) == (5, 7, 0)
    # What the ORM stored is what the fast read built.
    rows = list(Step.objects.filter(session_id="s").order_by("id"))
    assert [s.created_at for s in everything] == [r.created_at for r in rows]


def test_steps_read_back_equal_the_dataclass_built_normally() -> None:
    store = LoopStore()
    store.append(step("eq", 3, tool_args=b"[1]", completion_tokens=2))
    (got,) = store.last_n("eq", 5)
    built = RunStep(**{f.name: getattr(got, f.name) for f in dataclasses.fields(RunStep)})
    assert got == built
    assert hash(got) == hash(built)
    assert type(got) is RunStep
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.content = "changed"  # type: ignore[misc]


@pytest.mark.sqlite_only
def test_a_stamp_in_another_text_form_reads_back_through_the_general_path() -> None:
    # The fast path parses Django's text form; a row whose stamp was written in
    # another form (here with an offset, by hand) sends the whole read through
    # sql.utc, and every step still reads back right (decision record 0035).
    store = LoopStore(clock=Clock())
    for index in range(3):
        store.append(step("odd", index))
    first, second, third = Step.objects.filter(session_id="odd").order_by("id")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_step SET created_at = %s WHERE id = %s",
            ["2026-01-01 03:00:00+02:00", second.pk],
        )
    got = store.last_n("odd", 3)
    assert [s.created_at for s in got] == [
        first.created_at,
        datetime(2026, 1, 1, 1, tzinfo=UTC),
        third.created_at,
    ]
    assert all(s.created_at is not None and s.created_at.tzinfo is UTC for s in got)


def test_watched_or_not_the_same_things_are_stored() -> None:
    clock = Clock()
    store = LoopStore(clock=clock)
    store.append(step("bare", 0, content="x"))
    store.append(step("bare", 1, content="y"))
    with CaptureQueriesContext(connection):
        store.append(step("seen", 0, content="x"))
        store.append(step("seen", 1, content="y"))
        watched_read = store.last_n("seen", 0)

    def shape(steps: list[RunStep]) -> list[tuple[Any, ...]]:
        return [(s.step_index, s.step_type, s.content, s.tool_args) for s in steps]

    assert shape(store.steps("bare")) == shape(watched_read) == shape(store.steps("seen"))


def test_a_watcher_sees_every_statement_of_an_append() -> None:
    store = LoopStore()
    store.append(step("w", 0))
    with CaptureQueriesContext(connection) as captured:
        store.append(step("w", 1))
        store.last_n("w", 1)
    sql = [q["sql"] for q in captured.captured_queries]
    # The session exists: touched by the narrow UPDATE, watched or not.
    assert any(s.startswith("UPDATE agentstore_session SET updated_at") for s in sql)
    assert not any("INSERT INTO agentstore_session" in s for s in sql)
    assert any("INSERT INTO agentstore_step" in s for s in sql)
    assert any("FROM agentstore_step" in s and "SELECT" in s for s in sql)


@pytest.mark.sqlite_only
def test_a_later_append_is_one_update_and_one_insert() -> None:
    store = LoopStore()
    store.append(step("n", 0))
    seen: list[str] = []
    connection.ensure_connection()
    connection.connection.set_trace_callback(seen.append)
    try:
        store.append(step("n", 1))
    finally:
        connection.connection.set_trace_callback(None)
    statements = [s.split()[0].upper() for s in seen]
    assert statements == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]


def test_another_kind_of_session_is_refused_with_nothing_written() -> None:
    tree = TreeStore().create_session("/x")
    store = LoopStore()
    with pytest.raises(exceptions.WrongSessionKind, match="tree session"):
        store.append(step(tree.id, 0))
    with CaptureQueriesContext(connection), pytest.raises(exceptions.WrongSessionKind):
        store.append(step(tree.id, 0))
    assert not Step.objects.filter(session_id=tree.id).exists()
    assert Session.objects.get(pk=tree.id).kind == "tree"


@pytest.mark.sqlite_only
def test_a_failed_step_insert_rolls_the_session_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError

    from agentstore.stores import loop

    store = LoopStore()
    # A statement the database refuses after the session's upsert ran.
    monkeypatch.setattr(
        loop.steps_sql, "INSERT", f"INSERT INTO no_such_table VALUES ({'%s, ' * 8}%s)"
    )
    with pytest.raises(OperationalError, match="no_such_table"):  # raised as Django's
        store.append(step("gone", 0))
    monkeypatch.undo()
    assert not Session.objects.filter(pk="gone").exists()
    assert not connection.connection.in_transaction
    store.append(step("gone", 0))
    assert [s.step_index for s in store.steps("gone")] == [0]

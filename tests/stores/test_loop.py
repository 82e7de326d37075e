"""LoopStore: the agentloop conformance catalogue (docs/loop-store.md) and our own decisions.

Each catalogue case names its upstream test. Every test runs on the backend
``DATABASE_URL`` names (SQLite file or PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstore import exceptions
from agentstore.db import describe_connection
from agentstore.models import Grant, Session, Step
from agentstore.stores import LoopStore
from agentstore.stores.loop import prompt_digest
from agentstore.types import FinalizeSummary, LoopSession, RunStep, SessionInfo, TokenUsage

MAIN = "11111111-1111-1111-1111-111111111111"
A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
B = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb"
NEVER = "99999999-9999-9999-9999-999999999999"
BASE = datetime(2026, 1, 1, tzinfo=UTC)


class SteppingClock:
    """A clock that starts at ``start`` and advances ``step`` on every call."""

    def __init__(self, start: datetime = BASE, step: timedelta = timedelta(minutes=1)) -> None:
        self.current = start - step
        self.step = step

    def __call__(self) -> datetime:
        self.current += self.step
        return self.current


@pytest.fixture
def store(db: None) -> LoopStore:
    return LoopStore()


@pytest.fixture
def clocked(db: None) -> LoopStore:
    return LoopStore(clock=SteppingClock())


def step(session_id: str, index: int, **fields: object) -> RunStep:
    values: dict[str, object] = {"step_type": "response", "content": "content"}
    values.update(fields)
    return RunStep(session_id=session_id, step_index=index, **values)  # type: ignore[arg-type]


# -- A6.1 StepStoreContract ------------------------------------------------------


class TestStepStoreContract:
    def test_last_n_of_a_never_written_session_is_empty(self, store: LoopStore) -> None:
        assert store.last_n(NEVER, 10) == []

    def test_append_then_last_n_keeps_order_type_and_content(self, store: LoopStore) -> None:
        for i in range(4):
            store.append(step(MAIN, i, tool_args=b"{}", created_at=BASE + timedelta(seconds=i)))

        got = store.last_n(MAIN, 10)

        assert [s.step_index for s in got] == [0, 1, 2, 3]
        assert {(s.step_type, s.content) for s in got} == {("response", "content")}
        assert [s.created_at for s in got] == [BASE + timedelta(seconds=i) for i in range(4)]

    def test_summary_step_round_trips(self, store: LoopStore) -> None:
        store.append(
            step(
                MAIN,
                0,
                step_type="summary",
                content="[summary] earlier turns",
                tool_args=b'{"retain_from_step":42}',
            )
        )

        (got,) = store.last_n(MAIN, 10)

        assert (got.step_type, got.content) == ("summary", "[summary] earlier turns")
        assert got.tool_args is not None
        assert json.loads(got.tool_args) == {"retain_from_step": 42}

    def test_last_n_returns_the_most_recent_oldest_first(self, store: LoopStore) -> None:
        for i in range(5):
            store.append(step(MAIN, i))

        assert [s.step_index for s in store.last_n(MAIN, 2)] == [3, 4]

    def test_last_n_larger_than_the_trace_returns_everything(self, store: LoopStore) -> None:
        for i in range(3):
            store.append(step(MAIN, i))

        assert len(store.last_n(MAIN, 100)) == 3
        assert len(store.last_n(MAIN, 2**70)) == 3

    def test_sessions_are_isolated(self, store: LoopStore) -> None:
        for i in range(2):
            store.append(step(A, i))
        for i in range(3):
            store.append(step(B, i))

        got_a = store.last_n(A, 10)
        assert len(got_a) == 2
        assert {s.session_id for s in got_a} == {A}
        assert len(store.last_n(B, 10)) == 3


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    indices=st.lists(st.integers(min_value=0, max_value=5), max_size=12),
    n=st.integers(min_value=-2, max_value=15),
    args=st.one_of(st.none(), st.binary(max_size=0), st.just(b'{"retain_from_step": 1}')),
)
def test_last_n_is_the_tail_of_the_appends_in_order(
    store: LoopStore, indices: list[int], n: int, args: bytes | None
) -> None:
    sid = f"prop-{uuid.uuid4()}"  # examples share one database: a fresh session each
    appended = [step(sid, i, content=f"#{k}", tool_args=args) for k, i in enumerate(indices)]
    for value in appended:
        store.append(value)

    got = store.last_n(sid, n)

    expected = appended if n <= 0 else appended[-n:]
    assert [(s.step_index, s.content) for s in got] == [(s.step_index, s.content) for s in expected]
    assert {s.tool_args for s in got} <= {args or None}


# -- A6.2 SessionStoreContract ---------------------------------------------------


class TestSessionStoreContract:
    def test_get_unknown_is_the_empty_session(self, store: LoopStore) -> None:
        assert store.get(NEVER) == LoopSession()

    def test_get_does_not_create(self, store: LoopStore) -> None:
        store.get(NEVER)

        assert store.exists(NEVER) is False
        assert not Session.objects.filter(pk=NEVER).exists()

    def test_exists_unknown_is_false(self, store: LoopStore) -> None:
        assert store.exists(NEVER) is False

    def test_update_data_creates_the_session(self, store: LoopStore) -> None:
        store.update_data(MAIN, b'{"a":1}')

        assert store.exists(MAIN) is True
        assert Session.objects.get(pk=MAIN).kind == "loop"

    def test_update_data_replaces_the_snapshot_byte_for_byte(self, store: LoopStore) -> None:
        store.update_data(MAIN, b'{"step":1}')
        store.update_data(MAIN, b'{"step":2}')

        assert store.get(MAIN).data == b'{"step":2}'

    def test_update_data_accepts_none(self, store: LoopStore) -> None:
        store.update_data(MAIN, b'{"step":1}')
        store.update_data(MAIN, None)

        assert store.get(MAIN) == LoopSession(id=MAIN, data=None)

    def test_finalize_twice_last_run_wins(self, store: LoopStore) -> None:
        first = FinalizeSummary(
            status="completed",
            prompt_tokens=120,
            completion_tokens=34,
            step_count=6,
            duration_ms=1200,
            data_bytes_carried=4096,
        )
        store.finalize(MAIN, first)
        store.finalize(MAIN, FinalizeSummary(status="error", step_count=1))

        row = Session.objects.get(pk=MAIN)
        assert (row.status, row.step_count, row.prompt_tokens) == ("error", 1, 0)

    def test_finalize_keeps_the_snapshot(self, store: LoopStore) -> None:
        store.update_data(MAIN, b'{"keep":true}')
        store.finalize(MAIN, FinalizeSummary(status="completed"))

        assert store.get(MAIN).data == b'{"keep":true}'

    def test_snapshots_are_per_session(self, store: LoopStore) -> None:
        store.update_data(A, b'{"who":"a"}')
        store.update_data(B, b'{"who":"b"}')

        assert store.get(A).data == b'{"who":"a"}'
        assert store.get(B).data == b'{"who":"b"}'


# -- A6.3 agentloopsql/sqlite_test.go --------------------------------------------


def test_append_accepts_reused_step_indices(store: LoopStore) -> None:
    for i in [0, 1, 2, 0, 1, 2]:
        store.append(step(MAIN, i, step_type="user", content="turn"))

    assert [s.step_index for s in store.last_n(MAIN, 100)] == [0, 1, 2, 0, 1, 2]


def test_append_preserves_every_field(store: LoopStore) -> None:
    original = RunStep(
        session_id=MAIN,
        step_index=3,
        step_type="execute_js_result",
        content="the result",
        tool_args=b'{"k":"v"}',
        duration_ms=1234,
        prompt_tokens=55,
        completion_tokens=6,
        created_at=datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC),
    )
    store.append(original)

    (got,) = store.last_n(MAIN, 1)

    assert got == original
    assert got.tool_args == b'{"k":"v"}'
    assert got.created_at is not None and got.created_at.tzinfo is not None


def test_tool_args_are_kept_byte_for_byte(store: LoopStore) -> None:
    odd = '{ "b" : 1,\n  "a": [1.0, 2e3], "é": "\\u00e9" }'.encode()
    store.append(step(MAIN, 0, tool_args=odd))
    store.append(step(MAIN, 1, tool_args=None))

    assert [s.tool_args for s in store.steps(MAIN)] == [odd, None]


def test_created_at_keeps_microseconds_and_is_returned_in_utc(store: LoopStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    stamp = datetime(2026, 3, 4, 7, 6, 7, 123456, tzinfo=plus_two)
    store.append(step(MAIN, 0, created_at=stamp))

    (got,) = store.steps(MAIN)
    assert got.created_at == stamp
    assert got.created_at is not None and got.created_at.utcoffset() == timedelta(0)


def test_append_without_created_at_uses_the_clock(db: None) -> None:
    clock = SteppingClock(step=timedelta(seconds=1, microseconds=250))
    store = LoopStore(clock=clock)

    store.append(step(MAIN, 0))

    (got,) = store.steps(MAIN)
    # Like Go: the step's stamp is read first, the session's updated_at second.
    assert got.created_at == BASE
    row = Session.objects.get(pk=MAIN)
    assert row.created_at == row.updated_at == BASE + clock.step


@pytest.mark.django_db(transaction=True)
def test_session_survives_reopen() -> None:
    LoopStore().append(step("s1", 0, step_type="user", content="remember this"))
    LoopStore().update_data("s1", b'{"carried":true}')
    connections.close_all()

    reopened = LoopStore()
    (got,) = reopened.last_n("s1", 10)
    assert got.content == "remember this"
    assert reopened.get("s1") == LoopSession(id="s1", data=b'{"carried":true}')


def test_list_orders_by_recency_and_carries_the_opening(clocked: LoopStore) -> None:
    clocked.append(step("older", 0, step_type="user", content="the first question"))
    clocked.append(step("older", 1, step_type="response", content="an answer"))
    clocked.append(step("newer", 0, step_type="response", content="a greeting"))
    clocked.append(step("newer", 1, step_type="user", content="the second question"))
    clocked.append(step("newer", 2, step_type="response", content="another answer"))
    clocked.finalize(
        "newer",
        FinalizeSummary(status="completed", step_count=2, prompt_tokens=10, completion_tokens=2),
    )

    rows = clocked.list(0)

    assert [r.id for r in rows] == ["newer", "older"]
    newer = rows[0]
    assert newer.opening == "the second question"
    assert (newer.status, newer.steps) == ("completed", 2)
    assert newer.tokens == TokenUsage(prompt=10, completion=2)
    assert rows[1].opening == "the first question"
    assert rows[1].steps == 0  # never finalized: steps is finalize's count, not a row count
    assert newer.created_at is not None and newer.updated_at is not None
    assert newer.created_at < newer.updated_at


def test_list_opening_is_empty_without_a_user_step(store: LoopStore) -> None:
    store.append(step(MAIN, 0, step_type="response"))

    (row,) = store.list()
    assert row == SessionInfo(id=MAIN, created_at=row.created_at, updated_at=row.updated_at)
    assert row.created_at is not None


def test_list_respects_limit(clocked: LoopStore) -> None:
    for sid in ("a", "b", "c"):
        clocked.update_data(sid, b"{}")

    assert [r.id for r in clocked.list(2)] == ["c", "b"]
    assert len(clocked.list(-1)) == 3


def test_list_breaks_ties_by_id_descending(db: None) -> None:
    fixed = LoopStore(clock=lambda: BASE)
    for sid in ("m", "Z", "a", "b"):
        fixed.update_data(sid, None)

    # Code-point order on every backend: lowercase after uppercase.
    assert [r.id for r in fixed.list()] == ["m", "b", "a", "Z"]
    assert fixed.most_recent() == "m"


def test_finalize_alone_creates_a_listable_session(store: LoopStore) -> None:
    store.finalize("s1", FinalizeSummary(status="completed"))

    assert [r.id for r in store.list(0)] == ["s1"]
    assert store.get("s1").data is None


def test_finalize_does_not_move_created_at(clocked: LoopStore) -> None:
    clocked.update_data(MAIN, b"{}")
    clocked.finalize(MAIN, FinalizeSummary(status="completed"))

    row = Session.objects.get(pk=MAIN)
    assert row.created_at == BASE
    assert row.updated_at == BASE + timedelta(minutes=1)


def test_most_recent(clocked: LoopStore) -> None:
    with pytest.raises(exceptions.NoSession):
        clocked.most_recent()

    clocked.append(step("first", 0))
    clocked.append(step("second", 0))

    assert clocked.most_recent() == "second"


def test_delete(store: LoopStore) -> None:
    store.append(step("s1", 0))
    store.grant("s1", "Allow example.com?")

    store.delete("s1")

    assert store.exists("s1") is False
    assert store.last_n("s1", 10) == []
    assert store.grants("s1") == []


def test_delete_unknown_session_says_so(store: LoopStore) -> None:
    with pytest.raises(exceptions.NoSession, match="nope"):
        store.delete("nope")


def test_delete_of_a_missing_session_still_purges_its_grants(store: LoopStore) -> None:
    store.grant("gone", "Allow example.com?")

    with pytest.raises(exceptions.NoSession):
        store.delete("gone")

    assert store.is_granted("gone", "Allow example.com?") is False
    assert not Grant.objects.filter(session_id="gone").exists()


def test_delete_leaves_other_sessions_alone(store: LoopStore) -> None:
    store.append(step(A, 0))
    store.append(step(B, 0))
    store.grant(B, "q")

    store.delete(A)

    assert len(store.steps(B)) == 1
    assert store.grants(B) == ["q"]


@pytest.mark.sqlite_only
def test_database_is_in_wal_mode_with_a_busy_timeout(store: LoopStore) -> None:
    pragmas = describe_connection(store.using)

    assert pragmas["journal_mode"] == "wal"
    assert pragmas["busy_timeout_ms"] > 0


# -- A6.4 approvals, at the store level ------------------------------------------


class TestGrants:
    def test_approval_survives_into_a_later_store_and_revoke_forgets_it(
        self, store: LoopStore
    ) -> None:
        store.grant("s-1", "Allow example.com?")

        later = LoopStore()
        assert later.is_granted("s-1", "Allow example.com?") is True

        assert later.revoke("s-1") == 1
        assert later.is_granted("s-1", "Allow example.com?") is False

    def test_approval_does_not_leak_between_sessions(self, store: LoopStore) -> None:
        store.grant("s-1", "Allow example.com?")

        assert store.is_granted("s-2", "Allow example.com?") is False

    def test_grants_are_exact_question_text(self, store: LoopStore) -> None:
        store.grant("s-1", "Allow example.com?")

        assert store.is_granted("s-1", "Allow example.com? ") is False
        assert store.is_granted("s-1", "allow example.com?") is False

    def test_grant_needs_no_session_row(self, store: LoopStore) -> None:
        store.grant("s-1", "q")

        assert store.exists("s-1") is False
        row = Grant.objects.get(session_id="s-1")
        assert row.prompt_digest == prompt_digest("q")

    def test_grants_in_granted_order_then_prompt(self, clocked: LoopStore) -> None:
        clocked.grant("s-1", "second")
        clocked.grant("s-1", "first")
        fixed = LoopStore(clock=lambda: BASE + timedelta(hours=1))
        fixed.grant("s-1", "b")
        fixed.grant("s-1", "B")
        fixed.grant("s-1", "a")

        assert clocked.grants("s-1") == ["second", "first", "B", "a", "b"]

    def test_granting_again_refreshes_granted_at_without_duplicating(
        self, clocked: LoopStore
    ) -> None:
        clocked.grant("s-1", "x")
        clocked.grant("s-1", "y")
        clocked.grant("s-1", "x")

        assert clocked.grants("s-1") == ["y", "x"]
        assert Grant.objects.filter(session_id="s-1").count() == 2

    def test_grant_created_tells_a_first_approval_from_a_replay(self, clocked: LoopStore) -> None:
        first, created = clocked.grant_created("s-1", "x")
        again, replayed = clocked.grant_created("s-1", "x")

        assert (created, replayed) == (True, False)
        assert (first.session_id, first.prompt, again.prompt) == ("s-1", "x", "x")
        # A replay refreshes granted_at, and answers the grant as now stored.
        assert again.granted_at is not None and first.granted_at is not None
        assert again.granted_at > first.granted_at
        assert Grant.objects.get(session_id="s-1").granted_at == again.granted_at

    def test_grant_created_refuses_what_grant_refuses(self, store: LoopStore) -> None:
        for session_id, prompt, field in (("", "q", "session_id"), ("s-1", "", "prompt")):
            with pytest.raises(exceptions.ValidationError) as info:
                store.grant_created(session_id, prompt)
            assert info.value.field == field
        with pytest.raises(exceptions.ValidationError):
            store.grant_created("s-1", "a\x00b")
        assert not Grant.objects.exists()

    def test_revoke_without_grants_is_silent(self, store: LoopStore) -> None:
        assert store.revoke("nobody") == 0

    def test_long_prompts_are_keyed_by_digest(self, store: LoopStore) -> None:
        long = "Allow " + "x" * 20_000 + "?"
        store.grant("s-1", long)

        assert store.is_granted("s-1", long) is True
        assert store.grants("s-1") == [long]


# -- bad input: ValidationError naming the field, nothing written ----------------


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (RunStep(session_id="", step_type="user"), "step.session_id"),
        (RunStep(session_id="   ", step_type="user"), "step.session_id"),
        (RunStep(session_id="x" * 256, step_type="user"), "step.session_id"),
        (RunStep(session_id=MAIN), "step.step_type"),
        (RunStep(session_id=MAIN, step_type="t" * 65), "step.step_type"),
        (RunStep(session_id=MAIN, step_type="user", step_index=-1), "step.step_index"),
        (RunStep(session_id=MAIN, step_type="user", step_index=2**31), "step.step_index"),
        (RunStep(session_id=MAIN, step_type="user", duration_ms=-1), "step.duration_ms"),
        (RunStep(session_id=MAIN, step_type="user", prompt_tokens=-5), "step.prompt_tokens"),
        (
            RunStep(session_id=MAIN, step_type="user", completion_tokens=-1),
            "step.completion_tokens",
        ),
        (RunStep(session_id=MAIN, step_type="user", prompt_tokens=2**63), "step.prompt_tokens"),
        (RunStep(session_id=MAIN, step_type="user", tool_args=b"{not json"), "step.tool_args"),
        (RunStep(session_id=MAIN, step_type="user", tool_args=b"\xff"), "step.tool_args"),
        (RunStep(session_id=MAIN, step_type="user", tool_args="{}"), "step.tool_args"),  # type: ignore[arg-type]
        (RunStep(session_id=MAIN, step_type="user", content="a\x00b"), "step.content"),
        (
            RunStep(session_id=MAIN, step_type="user", created_at=datetime(2026, 1, 1)),
            "step.created_at",
        ),
    ],
)
def test_append_rejects_bad_input_and_writes_nothing(
    store: LoopStore, bad: RunStep, field: str
) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        store.append(bad)

    assert info.value.field == field
    assert field.split(".")[-1] in str(info.value)
    assert not Session.objects.exists()
    assert not Step.objects.exists()


@pytest.mark.parametrize(
    ("summary", "field"),
    [
        (FinalizeSummary(prompt_tokens=-1), "summary.prompt_tokens"),
        (FinalizeSummary(completion_tokens=-1), "summary.completion_tokens"),
        (FinalizeSummary(step_count=-1), "summary.step_count"),
        (FinalizeSummary(duration_ms=-1), "summary.duration_ms"),
        (FinalizeSummary(data_bytes_carried=-1), "summary.data_bytes_carried"),
        (FinalizeSummary(status="s" * 65), "summary.status"),
    ],
)
def test_finalize_rejects_bad_input_and_writes_nothing(
    store: LoopStore, summary: FinalizeSummary, field: str
) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        store.finalize(MAIN, summary)

    assert info.value.field == field
    assert not Session.objects.exists()


def test_session_writes_reject_an_empty_id(store: LoopStore) -> None:
    for write in (
        lambda: store.update_data("", None),
        lambda: store.finalize("", FinalizeSummary()),
        lambda: store.grant("", "q"),
        lambda: store.revoke(""),
        lambda: store.delete(""),
    ):
        with pytest.raises(exceptions.ValidationError) as info:
            write()
        assert info.value.field == "session_id"
    assert not Session.objects.exists()
    assert not Grant.objects.exists()


def test_update_data_rejects_non_json_snapshot(store: LoopStore) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        store.update_data(MAIN, b"nope")

    assert info.value.field == "snapshot"
    assert store.exists(MAIN) is False


def test_empty_tool_args_and_snapshot_mean_none(store: LoopStore) -> None:
    store.append(step(MAIN, 0, tool_args=b""))
    store.update_data(MAIN, b"")

    assert store.steps(MAIN)[0].tool_args is None
    assert store.get(MAIN).data is None


def test_grant_rejects_an_empty_prompt(store: LoopStore) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        store.grant("s-1", "")

    assert info.value.field == "prompt"
    assert not Grant.objects.exists()


def test_last_n_rejects_a_non_integer(store: LoopStore) -> None:
    with pytest.raises(exceptions.ValidationError):
        store.last_n(MAIN, "10")  # type: ignore[arg-type]


# -- the shared session table: other stores' sessions are not ours ---------------


@pytest.fixture
def tree_session(db: None) -> str:
    Session.objects.create(id="tree-1", kind="tree", created_at=BASE, updated_at=BASE)
    return "tree-1"


def test_writes_to_another_stores_session_are_refused(store: LoopStore, tree_session: str) -> None:
    for write in (
        lambda: store.append(step(tree_session, 0)),
        lambda: store.update_data(tree_session, b"{}"),
        lambda: store.finalize(tree_session, FinalizeSummary(status="completed")),
    ):
        with pytest.raises(exceptions.WrongSessionKind, match="tree session"):
            write()

    row = Session.objects.get(pk=tree_session)
    assert (row.kind, row.updated_at, row.data, row.status) == ("tree", BASE, None, "")
    assert not Step.objects.exists()


def test_reads_do_not_see_another_stores_session(store: LoopStore, tree_session: str) -> None:
    assert store.exists(tree_session) is False
    assert store.get(tree_session) == LoopSession()
    assert store.list() == []
    with pytest.raises(exceptions.NoSession):
        store.most_recent()
    # Deleting is a write: refused by the one kind error, nothing deleted.
    with pytest.raises(exceptions.WrongSessionKind):
        store.delete(tree_session)
    assert Session.objects.filter(pk=tree_session).exists()


# -- raw SQL and the ORM agree ----------------------------------------------------


@pytest.mark.parametrize("micro", [0, 890000, 1])
def test_rows_written_by_the_orm_and_by_append_read_back_alike(
    store: LoopStore, micro: int
) -> None:
    stamp = datetime(2026, 3, 4, 5, 6, 7, micro, tzinfo=UTC)
    store.update_data("orm", None)
    Step.objects.create(
        session_id="orm",
        step_index=7,
        step_type="execute_js",
        content="x",
        tool_args=b'{"k":"v"}',
        duration_ms=3,
        prompt_tokens=4,
        completion_tokens=5,
        created_at=stamp,
    )
    store.append(
        RunStep(
            session_id="raw",
            step_index=7,
            step_type="execute_js",
            content="x",
            tool_args=b'{"k":"v"}',
            duration_ms=3,
            prompt_tokens=4,
            completion_tokens=5,
            created_at=stamp,
        )
    )

    (via_orm,) = store.steps("orm")
    (via_raw,) = store.steps("raw")
    assert via_raw == RunStep(**{**_fields(via_orm), "session_id": "raw"})
    fields = ("step_index", "step_type", "content", "duration_ms", "created_at")
    orm_rows = {
        sid: Step.objects.filter(session_id=sid).values(*fields).get() for sid in ("orm", "raw")
    }
    assert orm_rows["orm"] == orm_rows["raw"]
    assert orm_rows["raw"]["created_at"] == stamp
    assert bytes(Step.objects.get(session_id="raw").tool_args or b"") == b'{"k":"v"}'
    # A raw-upserted session row is a complete ORM row too.
    session = Session.objects.get(pk="raw")
    assert session.kind == "loop" and session.incarnation and session.owner_id is None
    assert session.created_at == session.updated_at


def _fields(value: RunStep) -> dict[str, object]:
    return {name: getattr(value, name) for name in RunStep.__dataclass_fields__}


def test_updated_at_is_touched_by_every_write(clocked: LoopStore) -> None:
    clocked.append(step(MAIN, 0, created_at=BASE))
    first = Session.objects.get(pk=MAIN).updated_at
    clocked.update_data(MAIN, b"{}")
    second = Session.objects.get(pk=MAIN).updated_at
    clocked.finalize(MAIN, FinalizeSummary())
    third = Session.objects.get(pk=MAIN).updated_at

    assert first < second < third
    assert Session.objects.get(pk=MAIN).created_at == first


# -- async twins and threads -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_async_twins_from_an_event_loop() -> None:
    store = LoopStore()

    async def run() -> tuple[object, ...]:
        await store.aappend(step(MAIN, 0, step_type="user", content="hello"))
        await store.aappend(step(MAIN, 1))
        await store.aupdate_data(MAIN, b'{"n":1}')
        await store.afinalize(MAIN, FinalizeSummary(status="completed", step_count=2))
        await store.agrant(MAIN, "q?")
        results = (
            [s.step_index for s in await store.alast_n(MAIN, 1)],
            len(await store.asteps(MAIN)),
            (await store.aget(MAIN)).data,
            await store.aexists(MAIN),
            [(r.id, r.opening) for r in await store.alist()],
            await store.amost_recent(),
            await store.ais_granted(MAIN, "q?"),
            await store.agrants(MAIN),
            await store.arevoke(MAIN),
        )
        await store.adelete(MAIN)
        # The twins ran on asgiref's shared worker thread: close its connection.
        await sync_to_async(connections.close_all)()
        return results

    assert asyncio.run(run()) == (
        [1],
        2,
        b'{"n":1}',
        True,
        [(MAIN, "hello")],
        MAIN,
        True,
        ["q?"],
        1,
    )
    assert store.exists(MAIN) is False


@pytest.mark.django_db(transaction=True)
def test_threads_appending_to_one_new_session_race_safely() -> None:
    """Every thread's first append may try to create the session row at once (upsert)."""
    threads, appends = 4, 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work(worker: int) -> None:
        store = LoopStore()
        try:
            barrier.wait()
            for i in range(appends):
                store.append(step("shared", i, content=f"w{worker}"))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    assert errors == []
    got = LoopStore().steps("shared")
    assert len(got) == threads * appends
    for worker in range(threads):
        mine = [s.step_index for s in got if s.content == f"w{worker}"]
        assert mine == list(range(appends))
    assert Session.objects.filter(pk="shared").count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_first_approvals_are_exactly_one_create() -> None:
    """Threads approving the same new prompt at once: one is told "created", the rest replays.

    The API answers 201 or 200 from this flag (docs/api.md, "Replays"), so it
    must be decided by the write, not by a read before it.
    """
    threads = 4
    outcomes: list[bool] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work() -> None:
        store = LoopStore()
        try:
            barrier.wait()
            outcomes.append(store.grant_created("race", "Allow example.com?")[1])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    assert errors == []
    assert sorted(outcomes) == [False] * (threads - 1) + [True]
    assert Grant.objects.filter(session_id="race").count() == 1


# -- demo data ------------------------------------------------------------------------


def test_demo_seed_is_idempotent(db: None, django_user_model: type) -> None:
    from agentstore.demo import loop as demo

    owner = django_user_model.objects.create(username="loop-demo")
    first = demo.seed(owner)
    second = demo.seed(None)

    store = LoopStore()
    trace = store.steps(demo.SESSION_ID)
    assert [s.step_type for s in trace][:4] == [
        "user",
        "execute_js",
        "execute_js_result",
        "response",
    ]
    (summary,) = [s for s in trace if s.step_type == "summary"]
    assert json.loads(summary.tool_args or b"") == {"retain_from_step": 4}
    assert len(trace) == 7
    assert store.grants(demo.SESSION_ID) == [demo.PROMPT]
    (info,) = store.list()
    assert (info.status, info.steps, info.opening) == ("completed", 7, trace[0].content)
    assert Session.objects.get(pk=demo.SESSION_ID).owner == owner
    assert first[0].startswith("Created") and second[0].startswith("Kept")

"""LogStore refs against agentsession's ``storetest`` Refs group (docs/log-store.md, "Refs").

Refs are compare-and-swap names for a session (optionally a pinned entry),
with a log of every successful update. Races run in real threads on their own
connections (``transactional_db``), so the conflict rules are checked inside
the write transaction for real.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.db.models.functions import Lower
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstore import exceptions
from agentstore.models import Ref, RefLog
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore, RefStore, log_refs
from agentstore.stores.ref_queries import clash_candidates
from agentstore.types import RefTarget
from tests.stores.test_log_support import Harness, user


@pytest.fixture
def h(db: None) -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def T(session: str, entry: str = "") -> RefTarget:  # noqa: N802
    return RefTarget(session=session, entry=entry)


def sessions(store: LogStore, n: int) -> list[str]:
    return [store.create({}).id for _ in range(n)]


def test_create_if_absent(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    with pytest.raises(exceptions.NoRef):
        store.resolve_ref("chat/one")
    store.update_ref("chat/one", None, T(a))
    assert store.resolve_ref("chat/one") == T(a)
    with pytest.raises(exceptions.RefMoved) as moved:
        store.update_ref("chat/one", None, T(b))
    assert moved.value.current == T(a)
    assert store.resolve_ref("chat/one") == T(a)


def test_stale_expected_and_pin(h: Harness) -> None:
    store = h.new()
    a, b, c = sessions(store, 3)
    e = store.append(b, user("pin me"))
    store.update_ref("r", None, T(a))
    store.update_ref("r", T(a), T(b))
    with pytest.raises(exceptions.RefMoved) as moved:
        store.update_ref("r", T(a), T(c))
    assert moved.value.current == T(b)
    with pytest.raises(exceptions.RefMoved) as moved:
        store.update_ref("r", T(b, e), T(c))  # the entry is compared too
    assert moved.value.current == T(b)
    store.update_ref("r", T(b), T(b, e))
    assert store.resolve_ref("r") == T(b, e)


def test_expected_is_checked_before_next(h: Harness) -> None:
    store = h.new()
    (a,) = sessions(store, 1)
    store.update_ref("r", None, T(a))
    with pytest.raises(exceptions.RefMoved):
        store.update_ref("r", None, T("missing"))


def test_delete(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    store.update_ref("d", None, T(a))
    with pytest.raises(exceptions.RefMoved) as moved:
        store.update_ref("d", T(b), None)
    assert moved.value.current == T(a)
    store.update_ref("d", T(a), None)
    with pytest.raises(exceptions.NoRef):
        store.resolve_ref("d")
    with pytest.raises(exceptions.RefMoved) as moved:
        store.update_ref("d", T(a), None)
    assert moved.value.current is None
    store.update_ref("d", None, None)  # none → none on an absent ref: fine, not logged
    store.update_ref("d", None, T(a))
    assert len(store.ref_log("d")) == 3


GOOD = ["a", "a..b", "..a", ".hidden", "v1.2/x", "A-b_c/D.e", "x" * 200]
BAD = [
    "",
    "/",
    "/a",
    "a/",
    "a//b",
    ".",
    "..",
    "a/./b",
    "a/../b",
    "a b",
    "a:b",
    "a\\b",
    "é",
    "a\x00b",
    "x" * 201,
]


@pytest.mark.parametrize("name", BAD)
def test_bad_names(h: Harness, name: str) -> None:
    store = h.new()
    (a,) = sessions(store, 1)
    with pytest.raises(exceptions.RefNameError):
        store.update_ref(name, None, T(a))
    with pytest.raises(exceptions.RefNameError):
        store.resolve_ref(name)
    with pytest.raises(exceptions.RefNameError):
        store.ref_log(name)
    with pytest.raises(exceptions.RefNameError):
        h.read_only().update_ref(name, None, T(a))  # checked even on a read-only store
    assert not Ref.objects.exists()


def test_good_names_and_conflicts(h: Harness) -> None:
    store = h.new()
    (a,) = sessions(store, 1)
    for i, name in enumerate(GOOD):
        if i:
            store.update_ref(GOOD[i - 1], T(a), None)
        store.update_ref(name, None, T(a))
    store.update_ref(GOOD[-1], T(a), None)
    with pytest.raises(exceptions.RefNameError):
        store.list_refs("a b")
    for name in ("conversations/slack/C123", "x/1", "a", "v1.2/x"):
        store.update_ref(name, None, T(a))
    for name in (
        "conversations/slack",
        "conversations/slack/C123/thread",
        "CONVERSATIONS/slack/C999",
        "conversations/SLACK/C123",
        "X/1",
        "A/b",
        "V1.2/y",
        "a/b",
    ):
        with pytest.raises(exceptions.RefNameError):
            store.update_ref(name, None, T(a))
    for name in (
        "conversations/slack/C124",
        "conversations/discord/x",
        "ab",
        "x/12",
        "x/2/deeper/still/CONVERSATIONS/a/b",
    ):
        store.update_ref(name, None, T(a))
    store.update_ref("a", T(a), None)
    store.update_ref("a/b", None, T(a))
    with pytest.raises(exceptions.RefNameError):
        store.update_ref("a", None, T(a))
    store.update_ref("a/b", T(a), None)
    store.update_ref("a", None, T(a))


def test_target_rules(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    ea = store.append(a, user("a"))
    eb = store.append(b, user("b"))
    with pytest.raises(exceptions.NoSession):
        store.update_ref("t", None, T("missing"))
    with pytest.raises(exceptions.NoRef):
        store.resolve_ref("t")
    with pytest.raises(exceptions.NoEntry):
        store.update_ref("t", None, T(a, "sha256:" + "0" * 64))
    with pytest.raises(exceptions.NoEntry):
        store.update_ref("t", None, T(a, eb))
    store.update_ref("t", None, T(a, ea))
    fork = store.create({"id": "fork", "base": ea})
    store.update_ref("f", None, T(fork.id, ea))  # a prefix entry of the fork
    assert store.resolve_ref("f") == T("fork", ea)
    assert store.ref_log("never/set") == []


def test_dangling(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    store.update_ref("dang", None, T(a))
    store.delete(a)
    with pytest.raises(exceptions.NoSession) as gone:
        store.resolve_ref("dang")
    assert gone.value.target == T(a)
    assert [r.name for r in store.list_refs("")] == ["dang"]
    store.update_ref("dang", T(a), T(b))
    assert store.resolve_ref("dang") == T(b)


def test_recreated_session_leaves_the_ref_dangling(h: Harness) -> None:
    store = h.new()
    store.create({"id": "reused", "cwd": "/one"})
    store.update_ref("re", None, T("reused"))
    store.delete("reused")
    store.create({"id": "reused", "cwd": "/two"})
    with pytest.raises(exceptions.NoSession) as gone:
        store.resolve_ref("re")
    assert gone.value.target == T("reused")
    assert [r.target for r in store.list_refs("re")] == [T("reused")]
    new = store.session_for("re", {})
    assert new.id != "reused" and store.resolve_ref("re") == T(new.id)
    store.update_ref("re", T(new.id), T("reused"))
    assert store.resolve_ref("re") == T("reused")  # the move adopted the new incarnation
    before = len(store.ref_log("re"))
    store.update_ref("re", T("reused"), T("reused"))
    assert len(store.ref_log("re")) == before


def test_list_refs(h: Harness) -> None:
    store = h.new()
    (a,) = sessions(store, 1)
    for name in ("z", "chat/b", "chat/a", "chat/c/1", "chat2/x", "ticket/9"):
        store.update_ref(name, None, T(a))
    names = [r.name for r in store.list_refs("")]
    assert names == sorted(names) and len(names) == 6
    assert [r.name for r in store.list_refs("chat/")] == ["chat/a", "chat/b", "chat/c/1"]
    assert [r.name for r in store.list_refs("chat")] == ["chat/a", "chat/b", "chat/c/1", "chat2/x"]
    assert [r.name for r in store.list_refs("chat/c")] == ["chat/c/1"]
    assert store.list_refs("nothing") == []
    assert store.list_refs("CHAT") == []  # a plain, case-sensitive prefix
    assert all(r.updated_at is not None for r in store.list_refs(""))


def test_log(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    started = datetime.now(UTC) - timedelta(seconds=5)
    store.update_ref("l", None, T(a), reason="create")
    store.update_ref("l", T(a), T(b), reason="handoff")
    store.update_ref("l", T(b), None)
    store.update_ref("l", None, T(a), reason="again")
    with pytest.raises(exceptions.RefMoved):
        store.update_ref("l", T(b), T(a), reason="stale")
    with pytest.raises(exceptions.NoSession):
        store.update_ref("l", T(a), T("missing"))
    store.update_ref("l", T(a), T(a), reason="same")
    store.update_ref("c/2", None, T(b))
    log = store.ref_log("l")
    assert [(x.old, x.new, x.reason) for x in log] == [
        (None, T(a), "again"),
        (T(b), None, ""),
        (T(a), T(b), "handoff"),
        (None, T(a), "create"),
    ]
    times = [x.time for x in log]
    assert all(t is not None and t >= started for t in times)
    assert times == sorted(times, reverse=True)  # type: ignore[type-var]
    assert len(store.ref_log("c/2")) == 1


def test_second_store_and_read_only(h: Harness) -> None:
    first, second = h.new(), h.second()
    a, b = sessions(first, 2)
    first.update_ref("s", None, T(a))
    assert second.resolve_ref("s") == T(a)
    with pytest.raises(exceptions.RefMoved):
        second.update_ref("s", None, T(b))
    second.update_ref("s", T(a), T(b))
    assert first.resolve_ref("s") == T(b)
    with pytest.raises(exceptions.RefNameError):
        second.update_ref("S/x", None, T(a))
    assert len(first.ref_log("s")) == len(second.ref_log("s")) == 2

    reader = h.read_only()
    assert reader.resolve_ref("s") == T(b)
    assert [r.name for r in reader.list_refs("")] == ["s"]
    with pytest.raises(exceptions.ReadOnly):
        reader.update_ref("s", T(b), T(a))
    assert first.resolve_ref("s") == T(b)


def test_ref_store_owns_the_rows_log_store_delegates(h: Harness) -> None:
    """``RefStore`` used on its own reads and writes what the log store's methods do."""
    store = h.new()
    a, b = sessions(store, 2)
    fixed = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    refs = RefStore(clock=lambda: fixed)
    refs.update_ref("own/x", None, T(a), reason="direct")
    assert store.resolve_ref("own/x") == T(a)
    store.update_ref("own/x", T(a), T(b), reason="through the log store")
    assert refs.resolve_ref("own/x") == T(b)
    assert [(r.old, r.new, r.reason) for r in refs.ref_log("own/x")] == [
        (T(a), T(b), "through the log store"),
        (None, T(a), "direct"),
    ]
    assert refs.ref_log("own/x")[1].time == fixed
    assert [(r.name, r.target) for r in refs.list_refs("own/")] == [("own/x", T(b))]
    assert isinstance(store.refs, RefStore) and store.refs.using == store.using
    with pytest.raises(exceptions.ReadOnly):
        RefStore(read_only=True).update_ref("own/x", T(b), None)
    with pytest.raises(exceptions.NoSession):  # refs name log sessions only
        refs.update_ref("own/y", None, T("not-a-session"))
    assert Ref.objects.filter(name="own/x").values_list("session_id", flat=True).get() == b


def test_session_for(h: Harness) -> None:
    store = h.new()
    s1 = store.session_for("chat/x", {"cwd": "/sf"})
    assert store.resolve_ref("chat/x") == T(s1.id) and s1.header["cwd"] == "/sf"
    assert store.session_for("chat/x", {"cwd": "/sf"}) is s1
    store.delete(s1.id)
    s3 = store.session_for("chat/x", {"cwd": "/sf"})
    assert s3.id != s1.id and store.resolve_ref("chat/x") == T(s3.id)
    count = SessionRow.objects.count()
    with pytest.raises(exceptions.RefNameError):
        store.session_for("bad name", {})
    assert SessionRow.objects.count() == count


def test_session_for_loser_deletes_its_session(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    store = h.new()
    winner = h.second()
    real = LogStore.resolve_ref
    calls = {"n": 0}

    def stale_first(self: LogStore, name: str) -> RefTarget:
        calls["n"] += 1
        if calls["n"] == 1 and self is store:
            # The winner names its session between our resolve and our CAS.
            won = winner.create({})
            winner.update_ref(name, None, T(won.id))
            raise exceptions.NoRef(name)
        return real(self, name)

    monkeypatch.setattr(LogStore, "resolve_ref", stale_first)
    with pytest.raises(exceptions.SessionLocked):
        # The winner holds its session (same process, other store): the loser
        # may be refused the open, as the spec allows — but it must not leave
        # its own session behind.
        store.session_for("race/x", {})
    assert SessionRow.objects.filter(kind="log").count() == 1
    assert store.resolve_ref("race/x").session == SessionRow.objects.get().id


def test_continue_ref_and_resolve_current(h: Harness) -> None:
    store = h.new()
    s = store.create({"cwd": "/c"})
    store.append(s.id, {"type": "config", "model": "m"})
    store.update_ref("cr", None, T(s.id))
    assert store.resolve_current("cr") == (s.id, False)
    second = store.continue_ref("cr")
    assert store.resolve_ref("cr") == T(second.id)
    top = store.ref_log("cr")[0]
    assert (top.old, top.new, top.reason) == (T(s.id), T(second.id), "continued")
    third = store.continue_session(second.id)
    assert store.resolve_current("cr") == (third.id, True)
    for helper in (store.continue_ref, store.resolve_current):
        with pytest.raises(exceptions.NoRef):
            helper("missing/ref")  # type: ignore[operator]


def test_refs_survive_reopen(h: Harness) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    store.update_ref("p", None, T(a), reason="one")
    store.update_ref("p", T(a), T(b), reason="two")
    again = h.reopen(store)
    assert again.resolve_ref("p") == T(b)
    assert again.ref_log("p")[0].reason == "two"


def test_ref_log_survives_ref_deletion(h: Harness) -> None:
    store = h.new()
    (a,) = sessions(store, 1)
    store.update_ref("k", None, T(a))
    store.update_ref("k", T(a), None)
    assert RefLog.objects.filter(name="k").count() == 2
    store.delete(a)
    assert len(store.ref_log("k")) == 2


# -- races in real threads ---------------------------------------------------------


def _threads(n: int, fn: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * n
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:  # collected and asserted by the test
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.django_db(transaction=True)
def test_name_race() -> None:
    store = LogStore()
    try:
        (a,) = sessions(store, 1)
        for round_ in range(5):
            names = [f"p{round_}/q", f"p{round_}/q/r", f"P{round_}/q", f"p{round_}"]
            results = _threads(
                len(names), lambda i, names=names: store.update_ref(names[i], None, T(a))
            )
            wins = [r for r in results if r is None]
            assert len(wins) == 1, results
            assert all(isinstance(r, exceptions.RefNameError) for r in results if r is not None)
            assert len(store.list_refs(f"p{round_}")) + len(store.list_refs(f"P{round_}")) == 1
    finally:
        store.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stores", [1, 2])
def test_session_for_race(stores: int) -> None:
    pool = [LogStore() for _ in range(stores)]
    try:
        for round_ in range(3):
            name = f"race/{stores}/{round_}"
            results = _threads(16, lambda i, name=name: pool[i % stores].session_for(name, {}))
            winners = {r.id for r in results if not isinstance(r, Exception)}
            errors = [r for r in results if isinstance(r, Exception)]
            assert all(isinstance(e, exceptions.SessionLocked) for e in errors), errors
            assert len(winners) == 1
            assert store_ref(pool[0], name) == winners.pop()
        assert SessionRow.objects.filter(kind="log").count() == 3
        assert Ref.objects.count() == 3
    finally:
        for store in pool:
            store.close()


def store_ref(store: LogStore, name: str) -> str:
    return store.resolve_ref(name).session


def test_continue_ref_when_the_ref_moved_meanwhile(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = h.new()
    a, b = sessions(store, 2)
    store.update_ref("moving", None, T(a))
    real = LogStore.continue_session

    def and_move(self: LogStore, session_id: str, summary_item: Any = None) -> Any:
        successor = real(self, session_id, summary_item)
        self.update_ref("moving", T(a), T(b), reason="someone else")
        return successor

    monkeypatch.setattr(LogStore, "continue_session", and_move)
    with pytest.raises(exceptions.RefMoved) as moved:
        store.continue_ref("moving")
    assert moved.value.current == T(b)
    successor = moved.value.session  # type: ignore[attr-defined]
    assert successor.header["parent_session"] == a
    assert store.resolve_ref("moving") == T(b)


# -- the creation rules read a few names, not every name ------------------------

_SEGMENTS = st.sampled_from(["a", "A", "b", "B", "ab", "aB"])
_NAMES = st.lists(_SEGMENTS, min_size=1, max_size=3).map("/".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(existing=st.lists(_NAMES, max_size=8), name=_NAMES)
def test_clash_candidates_decide_as_every_name_would(
    h: Harness, existing: list[str], name: str
) -> None:
    """Probing ``clash_candidates`` decides exactly as checking every existing name.

    A tiny alphabet with case variants makes clashes of every kind frequent:
    prefix either way, case-only differences at any depth, and names that
    share a folded prefix without clashing.
    """
    Ref.objects.all().delete()
    store = h.new()
    (a,) = sessions(store, 1)
    kept: list[str] = []
    for other in existing:
        if other in kept or log_refs.conflict(other, kept):
            continue  # what the store would refuse; the refs stay pairwise clash-free
        store.update_ref(other, None, T(a))
        kept.append(other)
    if name in kept:
        return
    expected = log_refs.conflict(name, kept)
    got = log_refs.conflict(name, clash_candidates(name))
    assert bool(got) == bool(expected)
    if expected:
        with pytest.raises(exceptions.RefNameError):
            store.update_ref(name, None, T(a))
    else:
        store.update_ref(name, None, T(a))


def test_clash_probes_seek_the_folded_index(h: Harness) -> None:
    """Each probe is an index seek on ``LOWER(name)``, whatever the number of refs."""
    store = h.new()
    (a,) = sessions(store, 1)
    for n in range(50):
        store.update_ref(f"refs/heads/b{n}", None, T(a))
    connection = connections["default"]
    folded = Ref.objects.alias(folded=Lower("name"))
    probes = [
        folded.filter(folded="refs/heads").order_by("folded").values_list("name")[:1],
        folded.filter(folded__gte="refs/", folded__lt="refs0")
        .order_by("folded")
        .values_list("name")[:1],
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
        for probe in probes:
            query, params = probe.query.sql_with_params()
            if connection.vendor == "sqlite":
                cursor.execute(f"EXPLAIN QUERY PLAN {query}", params)
                plan = " ".join(str(row[-1]) for row in cursor.fetchall())
                assert "agentstore_ref_folded" in plan and "SCAN" not in plan, plan
            else:
                cursor.execute(f"EXPLAIN {query}", params)
                plan = " ".join(row[0] for row in cursor.fetchall())
                assert "agentstore_ref_folded" in plan, plan
    assert set(clash_candidates("refs/heads/b7")) <= {
        "refs/heads/b7",
        *Ref.objects.values_list("name", flat=True),
    }
    assert len(clash_candidates("refs/heads/new")) <= 2 * 3

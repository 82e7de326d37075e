"""Opening a log session from its head row (docs/log-store.md, "Opening a session").

Every scenario compares the session a store opened in O(1) — and then appended
to — with the same session read whole (every line parsed and re-hashed), which
is what the store did before: same leaf, same lines, the same refusals.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentstore import exceptions
from agentstore.formats.agentsession import Session
from agentstore.models import Entry
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore
from agentstore.stores.log_open import KEEP, StoredSession
from tests.stores.test_log_support import Harness, assistant, user


@pytest.fixture
def h(db: None) -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def call(call_id: str) -> dict[str, object]:
    return {
        "type": "item",
        "item": {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"},
    }


def reopened(h: Harness, session_id: str) -> tuple[LogStore, StoredSession]:
    """A new store and the session as it opens it for append (from its head, not read whole)."""
    store = h.new()
    opened = store.open(session_id)
    assert isinstance(opened, StoredSession) and not opened._full
    return store, opened


def same_as_read_whole(h: Harness, session_id: str, opened: Session) -> Session:
    """Check the stored head against the session read whole; return the latter."""
    reader = h.new(read_only=True)
    whole = reader.read(session_id)
    head = reader.open(session_id)  # from the head row, as a writer would open it
    assert isinstance(head, StoredSession) and not head._full
    assert len(opened) == len(head) == len(whole)
    assert head.leaf == whole.leaf == whole.resume_leaf()
    whole.verify()
    return whole


def test_open_is_the_head_and_appends_continue_the_chain(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    ids = [store.append(sid, user(f"u{n}")) for n in range(5)]
    store.close()
    store, opened = reopened(h, sid)
    assert len(opened) == 5 and opened.leaf == ids[-1]
    more = store.append(sid, assistant("a"))
    whole = same_as_read_whole(h, sid, store.open(sid))
    assert whole.seq_of(more) == 6 and whole.path(more)[-2].id == ids[-1]
    assert [e.id for e in whole.path(more)] == [*ids, more]


def test_leaf_labels_branches_and_clears_resume_like_a_whole_read(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    a = store.append(sid, user("a"))
    b = store.append(sid, user("b"))
    c = store.append(sid, user("c"))
    store.append(sid, {"type": "label", "target": a, "label": "leaf"})  # pop back to a
    store.close()
    store, opened = reopened(h, sid)
    assert opened.leaf == a
    d = store.append(sid, user("d"))  # continues from a, under the mark
    same_as_read_whole(h, sid, store.open(sid))
    store.append(sid, user("side", parent=b))  # a side branch: the leaf stays on d
    assert store.open(sid).leaf == d
    store.close()
    store, opened = reopened(h, sid)
    # The mark on a is in force: a reader resumes on the newest line below a
    # after the label — the side line (b descends from a), not d.
    whole = same_as_read_whole(h, sid, opened)
    assert opened.leaf == whole.leaf == whole.entries[-1].id != d
    store.append(sid, {"type": "label", "target": a, "label": None})  # clear the mark
    store.close()
    store, opened = reopened(h, sid)
    same_as_read_whole(h, sid, opened)
    store.append(sid, user("e", parent=c))
    store.close()
    same_as_read_whole(h, sid, reopened(h, sid)[1])


def test_a_repeated_call_id_is_refused_from_the_index(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    store.append(sid, call("call-1"))
    store.append(sid, user("x" * 10))
    store.close()
    store, _opened = reopened(h, sid)
    with pytest.raises(exceptions.CallIDRepeated):
        store.append(sid, call("call-1"))
    long_id = "c" * 300
    store.append(sid, call(long_id))
    with pytest.raises(exceptions.CallIDRepeated):
        store.append_many(sid, [call("call-2"), call("call-2")])
    store.close()
    store, _opened = reopened(h, sid)
    with pytest.raises(exceptions.CallIDRepeated):
        store.append(sid, call(long_id))
    assert Entry.objects.filter(session_id=sid, call_id="call-2").count() == 0


def test_a_failed_batch_leaves_the_open_session_as_it_was(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    first = store.append(sid, user("a"))
    store.close()
    store, opened = reopened(h, sid)
    with pytest.raises(exceptions.NoEntry):
        store.append_many(sid, [user("b"), user("c", parent="sha256:" + "0" * 64)])
    assert len(opened) == 1 and opened.leaf == first and not opened._full
    store.append(sid, user("b"))
    same_as_read_whole(h, sid, store.open(sid))


def test_held_entries_and_parents_are_looked_up(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    entry = user("fixed", ts="2026-01-01T00:00:00Z", parent=None)
    first = store.append(sid, entry)
    store.append(sid, user("next"))
    store.close()
    store, _opened = reopened(h, sid)
    assert store.append(sid, entry) == first  # already held: nothing written
    assert Entry.objects.filter(session_id=sid).count() == 2
    store.append(sid, user("child of first", parent=first))
    with pytest.raises(exceptions.NoEntry):
        store.append(sid, user("orphan", parent="sha256:" + "1" * 64))
    same_as_read_whole(h, sid, store.open(sid))


def test_a_fork_keeps_the_base_rule_when_opened_from_its_head(h: Harness) -> None:
    store = h.new()
    origin = store.create({}).id
    e = [store.append(origin, user(f"o{n}")) for n in range(3)]
    fork = store.create({"id": "fork", "parent_session": origin, "base": e[1]}).id
    store.append(fork, user("own"))
    store.close()
    store, _opened = reopened(h, fork)
    with pytest.raises(exceptions.BaseRule):
        store.append(fork, user("above the base", parent=e[0]))
    store.append(fork, user("on the base", parent=e[1]))
    same_as_read_whole(h, fork, store.open(fork))


def test_whole_tree_questions_read_the_session_whole(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    ids = [store.append(sid, user(f"u{n}")) for n in range(3)]
    store.close()
    store, opened = reopened(h, sid)
    store.append(sid, assistant("before"))
    assert [e.id for e in opened.entries][:3] == ids  # materialised: old lines + own
    assert opened._full and len(opened) == 4
    compaction = {
        "type": "compaction",
        "first_kept": ids[1],
        "summary": {"type": "message", "role": "user", "content": "sum"},
    }
    store.append(sid, compaction)
    store.append(sid, user("after"))
    same_as_read_whole(h, sid, store.open(sid))


def test_a_head_that_disagrees_is_not_trusted(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    for n in range(3):
        store.append(sid, user(f"u{n}"))
    store.close()
    for head in ("", '{"lines":2,"leaf":"x"}', "not json"):
        SessionRow.objects.filter(id=sid).update(log_head=head)
        opened = h.new().open(sid)
        assert isinstance(opened, StoredSession) and opened._full  # read whole instead
        assert len(opened) == 3
        h.stores[-1].close()
    store = h.new()
    store.append(sid, user("again"))  # and the append writes a good head
    store.close()
    same_as_read_whole(h, sid, reopened(h, sid)[1])


def test_open_trusts_older_lines_and_read_verifies_them(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    first = store.append(sid, user("hi"))
    store.append(sid, user("there"))
    store.close()
    Entry.objects.filter(session_id=sid, entry_id=first).update(
        line='{"type":"info","id":"x","parent":null,"ts":"2026-01-01T00:00:00Z"}'
    )
    # Opening reads the head and re-hashes the newest line only ...
    store, _opened = reopened(h, sid)
    # ... reading the session whole checks every line.
    with pytest.raises(exceptions.BadID):
        h.new(read_only=True).read(sid)


def test_tail_of_a_session_not_open_walks_from_the_head(h: Harness) -> None:
    store = h.new()
    sid = store.create({}).id
    ids = [store.append(sid, user(f"u{n}")) for n in range(40)]
    store.append(sid, user("side", parent=ids[5]))
    store.append(sid, {"type": "label", "target": ids[30], "label": "leaf"})
    tip = store.append(sid, user("tip"))
    store.close()
    reader = h.new(read_only=True)
    tail = reader.tail(sid, 5, types={"item"})
    assert tail.leaf == tip
    assert [e.id for e in tail.entries] == [*ids[27:31], tip]
    whole = reader.read(sid)
    walked = [e.id for e in whole.path(tip)]
    assert [e.id for e in reader.tail(sid).entries] == walked


def test_many_appends_keep_a_bounded_session_and_the_same_answers(h: Harness) -> None:
    """Past ``KEEP`` appends the opened session holds no more entries (decision record 0030).

    Its written appends count as stored lines: an early call id is still
    refused, a tail longer than what memory keeps still reads right, a failed
    batch is still undone, and materialising still sees every line.
    """
    store = h.new()
    sid = store.create({}).id
    store.append(sid, user("before"))
    store.close()
    store, opened = reopened(h, sid)
    first_call = store.append(sid, call("c-early"))
    ids = [store.append(sid, user(f"u{n}")) for n in range(KEEP + 40)]
    assert len(opened._known) <= KEEP and not opened._appended
    with pytest.raises(exceptions.AgentStoreError):
        store.append(sid, call("c-early"))  # refused from the rows, as a whole read does
    store.close()
    store, opened = reopened(h, sid)
    before = len(opened)
    with pytest.raises(exceptions.AgentStoreError):
        store.append_many(sid, [user("kept?"), call("c-early")])  # all or nothing
    assert len(store.open(sid)) == before
    store.close()
    store, opened = reopened(h, sid)
    for n in range(KEEP + 10):
        store.append(sid, user(f"v{n}"))
    tail = store.tail(sid, KEEP + 300).entries
    whole = same_as_read_whole(h, sid, store.open(sid))
    assert [e.id for e in tail] == [e.id for e in whole.path(whole.leaf)][-(KEEP + 300) :]
    assert ids[-1] in {e.id for e in tail} and first_call in {e.id for e in whole.entries}
    # A rule that walks the branch materialises the session: every line is there.
    walked = store.open(sid).path(whole.leaf)
    assert [e.id for e in walked] == [e.id for e in whole.path(whole.leaf)]


def test_a_created_session_is_bounded_too_and_reads_the_same(h: Harness) -> None:
    store = h.new()
    created = store.create({})
    assert isinstance(created, StoredSession) and not created._full  # nothing to hold yet
    sid = created.id
    store.append(sid, call("c-first"))
    for n in range(KEEP + 20):
        store.append(sid, user(f"u{n}"))
    assert len(created._known) <= KEEP and not created._appended
    with pytest.raises(exceptions.AgentStoreError):
        store.append(sid, call("c-first"))
    whole = same_as_read_whole(h, sid, created)
    assert [e.id for e in created.entries] == [e.id for e in whole.entries]  # materialised


def test_stored_session_overrides_only_the_formats_public_hooks() -> None:
    # StoredSession extends the format through its documented extension points
    # (docs/agentsession-format.md, "Answering without every entry in memory"),
    # never by replacing one of Session's underscore methods.
    format_methods = {
        name: klass
        for klass in reversed(Session.__mro__[:-1])
        for name, value in vars(klass).items()
        if callable(value) or isinstance(value, (classmethod, staticmethod, property))
    }
    overridden = {name for name in vars(StoredSession) if name in format_methods}
    private = {n for n in overridden if n.startswith("_") and not n.startswith("__")}
    assert private == set()
    for hook in ("has_entry", "call_id_used", "held_entry", "add_entry"):
        assert hook in overridden
        assert "override" in (getattr(Session, hook).__doc__ or "")

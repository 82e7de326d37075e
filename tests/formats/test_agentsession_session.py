"""The ``Session`` value: append outcomes, leaf rules, call rules, forks.

Ports the storetest cases of B9.1 that test the format itself (Append,
HeldAppend, ReadLine, Fork, ForkPrefix, DurableLeaf, Convergence), plus the
call-rule and base-rule refusals, on in-memory sessions.
"""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from agentstore import exceptions
from agentstore.formats import agentsession
from agentstore.formats.agentsession import Outcome, Session, canonical

ZERO = "sha256:" + "0" * 64


def user(text: str, **extra):
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
        **extra,
    }


def assistant(text: str, **extra):
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        },
        **extra,
    }


def call(call_id: str, name: str = "bash"):
    return {
        "type": "item",
        "item": {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"},
    }


def output(call_id: str):
    return {
        "type": "item",
        "item": {"type": "function_call_output", "call_id": call_id, "output": "ok"},
    }


@pytest.fixture
def ticking():
    """A session whose appends get distinct, deterministic ts values."""
    counter = itertools.count(1)
    session = Session.new({"cwd": "/p", "harness": {"name": "test"}, "id": "s-1"})
    session.clock = lambda: f"2026-09-17T12:00:{next(counter):02d}Z"
    return session


def snapshot(session: Session):
    return (session.lines, session.leaf, dict(session.labels()), len(session))


# -- storetest Append ---------------------------------------------------------


def test_append_case(ticking):
    s = ticking
    cfg = s.append({"type": "config", "model": "m"})
    hi = s.append(user("hi"))
    assert cfg.id.startswith("sha256:") and cfg.outcome is Outcome.CONTINUED
    assert len(s) == 2 and s.leaf == hi.id and s.entry(hi.id).parent == cfg.id
    s.branch(cfg.id)
    other = s.append(user("other"))
    assert s.children(cfg.id) == [hi.id, other.id]
    s.reset_leaf()
    info = s.append({"type": "info", "name": "n"})
    assert s.roots() == [cfg.id, info.id]
    ext = s.append({"type": "acme:note", "text": "x"})
    assert s.entry(ext.id).type == "acme:note"
    before = snapshot(s)
    with pytest.raises(exceptions.BadID):
        s.append({"type": "info", "name": "forced", "id": cfg.id})
    with pytest.raises(exceptions.NoEntry):
        s.append({"type": "info", "name": "x", "parent": "ghost"})
    with pytest.raises(exceptions.ValidationError, match="entry.item is required"):
        s.append({"type": "item"})
    assert snapshot(s) == before and len(s) == 5
    s.branch(hi.id)
    ctx = s.context()
    assert ctx.settings["model"] == "m" and len(ctx.items) == 1


def test_append_returns_exact_canonical_line(ticking):
    r = ticking.append({"type": "config", "model": "m", "extra": {"t": 1.0}})
    expected = canonical.dumps({**canonical.parse(r.line)}).decode()
    assert r.line == expected
    assert '"t":1}' in r.line  # 1.0 is spelt the JCS way
    assert r.entry.line == r.line and r.seq == 1 and r.written


def test_held_append(ticking):
    s = ticking
    root = s.append({**user("root"), "ts": "2026-09-17T16:00:00Z"})
    first = s.append({**user("once"), "parent": root.id, "ts": "2026-09-17T16:00:01Z"})
    again = s.append({**user("once"), "parent": root.id, "ts": "2026-09-17T16:00:01Z"})
    assert again.id == first.id and again.outcome is Outcome.HELD and not again.written
    assert len(s) == 2
    reread = agentsession.loads(agentsession.dumps(s))
    assert len(reread) == 2 and len({e.id for e in reread}) == 2


def test_read_line_keeps_the_line_as_read(ticking):
    s = ticking
    root = s.append({"type": "info", "name": "root"})
    lines = [
        '{"type":"link","rel":"subagent","parent":"' + root.id + '","ts":"2026-09-17T16:00:01Z"}',
        '{"type":"label","label":"x","parent":"'
        + root.id
        + '","ts":"2026-09-17T16:00:02Z","target":"'
        + root.id
        + '"}',
    ]
    for line in lines:
        obj = canonical.parse(line)
        hashed = agentsession.entry_id(obj)
        assert s.append(obj).id == hashed
    for session in (s, agentsession.loads(agentsession.dumps(s))):
        for e in session:
            assert agentsession.entry_id(canonical.parse(e.line)) == e.id


def test_reserved_member_and_types(ticking):
    with pytest.raises(exceptions.ReservedMember):
        ticking.append({"type": "info", "content": "sha256:x"})
    with pytest.raises(exceptions.ValidationError, match="entry.type is required"):
        ticking.append({"name": "x"})
    with pytest.raises(exceptions.ValidationError, match="item_reference"):
        ticking.append({"type": "item", "item": {"type": "item_reference", "id": "x"}})
    with pytest.raises(exceptions.ValidationError, match="summary"):
        ticking.append({"type": "branch_summary"})
    with pytest.raises(exceptions.ValidationError, match="ts"):
        ticking.append({"type": "info", "ts": "2026-09-17 12:00:00"})
    assert len(ticking) == 0


def test_append_normalises_and_records(ticking):
    r = ticking.append(
        {"type": "custom", "ns": "acme", "data": {"text": "cut \ud83d", "n": 2**53 + 1}}
    )
    body = canonical.parse(r.line)
    assert body["data"] == {"text": "cut \ufffd", "n": 9007199254740992}
    assert body["normalised"] == [
        {"at": "/data/n", "was": "9007199254740993"},
        {"at": "/data/text", "was": '"cut \\ud83d"'},
    ]


# -- leaf rules ---------------------------------------------------------------


def test_outcomes_and_live_leaf(ticking):
    s = ticking
    a = s.append(user("a"))
    b = s.append(user("b"))
    side = s.append({**user("side"), "parent": a.id})
    assert side.outcome is Outcome.BRANCHED and s.leaf == b.id
    moved = s.append({"type": "label", "target": a.id, "label": "leaf"})
    assert moved.outcome is Outcome.LEAF_MOVED and s.leaf == a.id
    # A leaf label naming a leaf label is not allowed: nothing moves.
    not_moved = s.append({"type": "label", "target": moved.id, "label": "leaf", "parent": b.id})
    assert not_moved.outcome is Outcome.LEAF_NOT_MOVED and s.leaf == a.id
    held = s.append({**user("side"), "parent": a.id, "ts": side.entry.ts})
    assert held.outcome is Outcome.HELD and held.id == side.id


def test_branch_and_reset_are_not_stored(ticking):
    s = ticking
    a = s.append(user("a"))
    b = s.append(user("b"))
    s.branch(a.id)
    with pytest.raises(exceptions.NoEntry):
        s.branch("sha256:nope")
    reread = agentsession.loads(agentsession.dumps(s))
    assert s.leaf == a.id and reread.leaf == b.id
    s.reset_leaf()
    assert s.leaf == "" and s.context().items == []
    with pytest.raises(exceptions.NoEntry):
        s.mark_leaf()


def test_durable_leaf_mark_then_extend(ticking):
    s = ticking
    a = s.append(user("a"))
    s.append(user("b"))
    s.branch(a.id)
    mark = s.append(s.mark_leaf())
    assert mark.outcome is Outcome.LEAF_MOVED and s.leaf == a.id
    c = s.append(user("c"))
    d = s.append(user("d"))
    reread = agentsession.loads(agentsession.dumps(s))
    assert reread.leaf == d.id
    assert [i["content"][0]["text"] for i in reread.context().items] == ["a", "c", "d"]
    # Mark without extending: the resume rule rests on the marked entry.
    s.branch(c.id)
    s.append(s.mark_leaf())
    assert agentsession.loads(agentsession.dumps(s)).leaf == c.id
    # A label null on the target clears the mark: back to the last entry,
    # walked up past leaf labels.
    s.append({"type": "label", "target": c.id, "label": None, "parent": d.id})
    reread = agentsession.loads(agentsession.dumps(s))
    assert reread.labels().get(c.id) is None
    assert reread.leaf == reread.entries[-1].id


def test_resume_rule_walks_up_past_leaf_labels(ticking):
    s = ticking
    a = s.append(user("a"))
    b = s.append(user("b"))
    s.append({"type": "label", "target": b.id, "label": "leaf"})  # last line is a leaf label
    reread = agentsession.loads(agentsession.dumps(s))
    assert reread.leaf == b.id
    assert a.id in reread


def test_labels_name_superseded(ticking):
    s = ticking
    a = s.append(user("a"))
    s.append({"type": "label", "target": a.id, "label": "x"})
    s.append({"type": "label", "target": a.id, "label": "y"})
    s.append({"type": "info", "name": "first"})
    s.append({"type": "info", "name": ""})
    s.append({"type": "link", "rel": "continued_in", "session": "next-1"})
    s.append({"type": "link", "rel": "continued_in", "session": ""})
    assert s.labels() == {a.id: "y"}
    assert s.name() == "first"
    assert s.superseded_by() == "next-1"
    s.append({"type": "label", "target": a.id, "label": None})
    assert s.labels() == {}


def test_prepare_changes_nothing_until_commit(ticking):
    s = ticking
    a = s.append(user("a"))
    pending = s.prepare(user("b"))
    assert len(s) == 1 and s.leaf == a.id and pending.seq == 2
    result = s.commit(pending)
    assert s.leaf == result.id and len(s) == 2
    stale = s.prepare(user("c"))
    s.append(user("d"))
    with pytest.raises(exceptions.ConcurrentWriter):
        s.commit(stale)


# -- convergence --------------------------------------------------------------


def test_convergence_sorted_and_checked(ticking):
    s = ticking
    s.append({"type": "config", "model": "m"})
    kept = s.append(user("kept"))
    abandoned = s.append({**user("abandoned"), "parent": kept.id})
    other = "01995b2a-0000-7000-8000-0000000000ff"
    join = s.append(
        {
            **user("join"),
            "parent": kept.id,
            "parents": [{"session": other, "entry": "child-leaf"}, {"entry": abandoned.id}],
        }
    )
    reread = agentsession.loads(agentsession.dumps(s))
    e = reread.entry(join.id)
    assert list(e.parents) == [{"entry": abandoned.id}, {"session": other, "entry": "child-leaf"}]
    assert e.parent == kept.id
    assert len(reread.context_at(join.id).items) == 2
    before = snapshot(s)
    for parents in (
        [{"entry": kept.id}],  # names the parent
        [{"entry": abandoned.id}, {"entry": abandoned.id}],  # repeats
        [{"entry": "sha256:later"}],  # not (yet) in the session
        "not a list",
    ):
        with pytest.raises(exceptions.BadConvergence):
            s.append({**user("bad"), "parent": kept.id, "parents": parents})
    assert snapshot(s) == before
    # An empty list is omitted, so it hashes like no list at all.
    r = s.append({"type": "info", "name": "p", "parents": []})
    assert "parents" not in canonical.parse(r.line)


# -- call rules ---------------------------------------------------------------


@pytest.fixture
def with_call(ticking):
    s = ticking
    s.append(user("do it"))
    fc = s.append(call("call_1"))
    return s, fc.id


def decision(target, verdict, call_id="call_1"):
    return {
        "type": "decision",
        "target": target,
        "call_id": call_id,
        "verdict": verdict,
        "by": "policy",
    }


def dispatch(target, call_id="call_1"):
    return {"type": "dispatch", "target": target, "call_id": call_id}


def test_call_id_rules(with_call):
    s, _fc = with_call
    with pytest.raises(exceptions.CallIDEmpty):
        s.append(call(""))
    # Unique across the whole session, other branches included.
    s.reset_leaf()
    with pytest.raises(exceptions.CallIDRepeated):
        s.append(call("call_1"))


def test_decision_and_dispatch_targets(with_call):
    s, fc = with_call
    first = s.entries[0].id
    with pytest.raises(exceptions.BadTarget):
        s.append(dispatch(first))  # not a function_call
    with pytest.raises(exceptions.BadTarget):
        s.append(dispatch(fc, call_id="call_2"))  # other call id
    s.branch(first)
    with pytest.raises(exceptions.BadTarget):
        s.append(dispatch(fc))  # not on the path
    with pytest.raises(exceptions.ValidationError, match="verdict"):
        s.append({**decision(fc, "maybe"), "parent": fc})


def test_call_lifecycle(with_call):
    s, fc = with_call
    s.append(decision(fc, "hold"))
    s.append(decision(fc, "proceed"))
    with pytest.raises(exceptions.AnswerNotDispatched):
        s.append(decision(fc, "answer"))
    fork_point = s.leaf
    s.append(dispatch(fc))
    with pytest.raises(exceptions.RejectDispatched):
        s.append(decision(fc, "reject"))
    after_dispatch = s.leaf
    s.append(decision(fc, "answer"))
    with pytest.raises(exceptions.CallAnswered):
        s.append(dispatch(fc))
    # Another branch: reject before dispatch, then nothing may run.
    s.branch(fork_point)
    s.append(decision(fc, "reject"))
    with pytest.raises(exceptions.CallRejected):
        s.append(dispatch(fc))
    # A third: the output completes the call.
    s.branch(after_dispatch)
    s.append(output("call_1"))
    before = snapshot(s)
    for bad in (dispatch(fc), decision(fc, "proceed"), decision(fc, "reject")):
        with pytest.raises(exceptions.CallCompleted):
            s.append(bad)
    assert snapshot(s) == before


# -- forks --------------------------------------------------------------------


@pytest.fixture
def origin(ticking):
    s = ticking
    ids = [
        s.append({"type": "config", "model": "m"}).id,
        s.append(user("q")).id,
        s.append(assistant("a")).id,
        s.append(user("later")).id,
    ]
    return s, ids


def test_fork(origin):
    s, ids = origin
    fork = Session.fork(s, {"id": "fork-1", "base": ids[2]})
    assert fork.header["base"] == ids[2] and fork.header["parent_session"] == s.id
    assert fork.header["payload"] == s.header["payload"]
    assert fork.leaf == ids[2] and len(fork) == 3
    assert fork.is_prefix(ids[0]) and fork.is_prefix(ids[2])
    fork.clock = s.clock
    instead = fork.append(user("instead"))
    assert instead.entry.parent == ids[2] and fork.leaf == instead.id
    with pytest.raises(exceptions.BaseRule) as exc:
        fork.append({**user("above"), "parent": ids[0]})
    assert isinstance(exc.value, exceptions.NoEntry)
    fork.reset_leaf()
    with pytest.raises(exceptions.BaseRule):
        fork.append(user("second root"))
    fork.branch(instead.id)
    with pytest.raises(exceptions.BaseRule):
        fork.branch(ids[0])
    # Leaf labels cannot move the leaf above the base.
    up = fork.append({"type": "label", "target": ids[1], "label": "leaf"})
    assert up.outcome is Outcome.LEAF_NOT_MOVED
    # Reading the fork back keeps the base rule and the prefix.
    reread = agentsession.loads(agentsession.dumps(fork))
    assert reread.base == ids[2] and len(reread) == 5 and reread.leaf == instead.id
    # A fork of a fork, from an entry on the first fork's prefix.
    fork3 = Session.fork(reread, {"id": "fork-3", "base": ids[1]})
    assert len(fork3) == 2 and fork3.header["parent_session"] == reread.id
    fork3.append(user("works"))
    # The origin is unchanged.
    assert len(s) == 4 and s.leaf == ids[3] and not s.base


def test_fork_refusals(origin):
    s, ids = origin
    with pytest.raises(exceptions.NoEntry):
        Session.fork(s, {"id": "f", "base": ZERO})
    with pytest.raises(exceptions.ValidationError, match="media"):
        Session.fork(s, {"id": "f", "base": ids[1], "media": "sidecar"})
    label = s.append({"type": "label", "target": ids[1], "label": "leaf"})
    with pytest.raises(exceptions.ValidationError, match="leaf label"):
        Session.fork(s, {"id": "f", "base": label.id})


def test_fork_prefix_convergence():
    s = Session.new({"id": "o", "payload": "openresponses/2020-01-01"})
    s.clock = iter(f"2026-09-17T12:00:0{i}Z" for i in range(10)).__next__
    u = s.append(user("u"))
    a = s.append(assistant("a"))
    b = s.append({**user("b"), "parent": u.id})
    j = s.append({**user("j"), "parent": b.id, "parents": [{"entry": a.id}]})
    fork = Session.fork(s, {"id": "f1", "base": b.id})
    assert fork.header["payload"] == "openresponses/2020-01-01"
    assert agentsession.loads(agentsession.dumps(fork)).header["payload"] == (
        "openresponses/2020-01-01"
    )
    with pytest.raises(exceptions.BadConvergence):
        Session.fork(s, {"id": "f2", "base": j.id})


def test_session_copy_is_private(origin):
    s, ids = origin
    other = s.copy()
    other.branch(ids[0])
    assert s.leaf == ids[3]
    s.append(user("more"))
    assert len(other) == 4 and len(s) == 5


def test_raise_format():
    s = agentsession.loads(
        '{"created_at":"2026-09-17T12:00:00Z","format":"agentsession/0.7","id":"x",'
        '"payload":"openresponses/2026-04-24","type":"session"}\n'
    )
    assert s.raise_format() is True
    assert s.header["format"] == "agentsession/0.11"
    assert '"format":"agentsession/0.11"' in s.header_line
    assert s.raise_format() is False


def test_id_is_hash_of_envelope_over_content_hash(ticking):
    r = ticking.append({"type": "info", "name": "n", "ts": "2026-09-17T12:00:00Z", "parent": None})
    content = hashlib.sha256(b'{"name":"n"}').hexdigest()
    env = (
        '{"content":"sha256:'
        + content
        + '","parent":null,"ts":"2026-09-17T12:00:00Z","type":"info"}'
    )
    assert r.id == "sha256:" + hashlib.sha256(env.encode()).hexdigest()
    assert (
        r.line
        == '{"id":"'
        + r.id
        + '","name":"n","parent":null,"ts":"2026-09-17T12:00:00Z","type":"info"}'
    )


def test_module_needs_no_django_settings(tmp_path):
    # The format module is pure Python: it must import and work in a process
    # with no DJANGO_SETTINGS_MODULE and no app registry.
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    code = (
        "from agentstore.formats import agentsession as a\n"
        "s = a.Session.new({'cwd': '/p'})\n"
        "s.append({'type': 'info', 'name': 'x'})\n"
        "print(a.loads(a.dumps(s)).name())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "x"


def test_rebuild_from_rows_and_extend(ticking):
    # What a store does: keep the header line and the exact entry lines as
    # rows, rebuild a Session from them, and extend a follower line by line.
    s = ticking
    a = s.append(user("a"))
    b = s.append(user("b"))
    s.branch(a.id)
    s.append(s.mark_leaf())
    rebuilt = Session.from_lines(s.header_line, s.lines)
    assert rebuilt.lines == s.lines and rebuilt.leaf == a.id and rebuilt.header == s.header
    follower = Session.from_lines(s.header_line, s.lines[:1])
    assert follower.leaf == a.id
    follower.extend_line(s.lines[1])
    assert follower.leaf == b.id  # the resume rule: last entry
    follower.extend_line(s.lines[2])
    assert follower.leaf == a.id  # a recorded leaf label moves it
    assert follower.extend_line(s.lines[1]).id == b.id and len(follower) == 3  # held
    tampered = s.lines[1].replace('"b"', '"B"')
    with pytest.raises(exceptions.BadID):
        Session.from_lines(s.header_line, [s.lines[0], tampered])
    with pytest.raises(exceptions.NoEntry):
        Session.from_lines(s.header_line, s.lines[1:2])


def test_resume_state_follows_the_resume_rule_line_by_line() -> None:
    """``advance_resume`` (what a store keeps per append) agrees with ``resume_leaf``."""
    rng = random.Random(7)
    for _trial in range(120):
        s = Session.new({})
        ids: list[str] = []
        for n in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.5 or not ids:
                e: dict[str, object] = {"type": "info", "n": n}
                if ids and rng.random() < 0.3:
                    e["parent"] = rng.choice([*ids, None])
            else:
                value = "leaf" if r < 0.8 else (None if r < 0.9 else "bookmark")
                e = {"type": "label", "target": rng.choice(ids), "label": value}
            ids.append(s.append(e).id)
            assert s.resume_state().leaf == s.resume_leaf()
        if len(ids) > 2:
            base = rng.choice(ids)
            if not s.entry(base).is_leaf_label:  # type: ignore[union-attr]
                fork = Session.fork(s, {"base": base})
                for n in range(rng.randint(0, 5)):
                    fork.append({"type": "info", "f": n})
                    assert fork.resume_state().leaf == fork.resume_leaf()


def test_from_object_builds_the_same_entry_as_the_constructor() -> None:
    # Entry.from_object uses a positional builder (decision record 0035): the same object.
    from agentstore.formats.agentsession import Entry

    obj = {"id": "sha256:a", "type": "item", "parent": None, "ts": "2026-01-01T00:00:00Z"}
    for extra in ({}, {"parents": [{"entry": "e"}]}, {"parent": "sha256:p"}):
        data = {**obj, **extra}
        built = Entry.from_object(data, "line")
        made = Entry(
            id=data["id"],
            type=data["type"],
            parent=data.get("parent"),
            ts=data["ts"],
            line="line",
            data=data,
            parents=tuple(data.get("parents") or ()),
        )
        assert type(built) is Entry
        assert built == made and repr(built) == repr(made)

    class Marked(Entry):
        pass

    assert type(Marked.from_object(obj, "line")) is Marked

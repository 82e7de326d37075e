"""Where agentstore's agentsession module meets the reference library's behaviour.

Two groups: the remaining read/write differences (each now matches the
reference, or is documented in decision records 0037, 0038 and 0039), and
the reference's helpers — compaction builders checked against
the checkpoints and ``first_kept`` of the upstream fixtures, the RFC 0002
context hash and its fork rule, ``leaves()``, the ``extra`` helpers and the
canonical request's tool shape.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from agentstore import exceptions
from agentstore.formats import agentsession
from agentstore.formats.agentsession import Session, canonical

SESSIONS = Path(__file__).resolve().parent.parent / "data" / "agentsession" / "sessions"


def read(name: str, folder: Path = SESSIONS) -> str:
    return (folder / f"{name}.jsonl").read_text(encoding="utf-8")


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
        **extra,
    }


def ticking(session_id: str = "s-1", start: int = 1) -> Session:
    counter = itertools.count(start)
    session = Session.new({"id": session_id})
    session.clock = lambda: f"2026-09-17T12:{next(counter):02d}:00Z"
    return session


def forged(line: str, **members: Any) -> str:
    """``line`` with ``members`` set and its id recomputed, so only the rule under test trips."""
    obj = canonical.parse(line)
    obj.update(members)
    obj["id"] = agentsession.entry_id(obj)
    return canonical.dumps(obj).decode("utf-8")


# -- 1. reserved member on read --------------------------------------------------


def test_a_read_line_with_a_content_member_is_refused():
    text = read("basic")
    header, first, *rest = text.splitlines()
    bad = forged(first, content=1)
    # content sits outside the hash: content 1 and 2 give the same id.
    assert canonical.parse(forged(first, content=2))["id"] == canonical.parse(bad)["id"]
    with pytest.raises(exceptions.ReservedMember) as caught:
        agentsession.loads("\n".join([header, bad, *rest]) + "\n")
    assert caught.value.field == "line 2"
    session = agentsession.loads(header + "\n")
    with pytest.raises(exceptions.ReservedMember):
        session.extend_line(bad)


# -- 2. convergence naming one entry twice ----------------------------------------


def test_convergence_naming_an_entry_plainly_and_through_the_own_session_id():
    s = ticking()
    a = s.append(user("a"))
    s.append(user("b"))
    with pytest.raises(exceptions.BadConvergence):
        s.append(user("c", parents=[{"entry": a.id}, {"session": s.id, "entry": a.id}]))
    # On read too: the same line written by another writer.
    text = agentsession.dumps(s)
    obj = {
        "type": "item",
        "parent": s.leaf,
        "ts": "2026-09-17T13:00:00Z",
        "parents": [{"entry": a.id}, {"entry": a.id, "session": s.id}],
        "item": {"type": "message", "role": "user", "content": []},
    }
    obj["id"] = agentsession.entry_id(obj)
    with pytest.raises(exceptions.BadConvergence):
        agentsession.loads(text + canonical.dumps(obj).decode() + "\n")
    # Naming it once through the own id is fine (and the same as plainly).
    ok = s.append(user("d", parents=[{"session": s.id, "entry": a.id}]))
    assert ok.entry.parents == ({"entry": a.id, "session": s.id},)


# -- 3. and 8. blank lines; the truncated line's number ---------------------------


def test_blank_lines_are_skipped_and_line_numbers_count_them():
    text = read("basic")
    header, *entries = text.splitlines()
    spaced = "\n".join([header, "", entries[0], "   ", *entries[1:], "", ""]) + "\n"
    session = agentsession.loads(spaced)
    assert session.lines == entries and session.leaf == agentsession.loads(text).leaf
    broken = "\n".join([header, "", entries[0], "{not json", *entries[1:]])
    with pytest.raises(exceptions.ValidationError) as caught:
        agentsession.loads(broken)
    assert caught.value.field == "line 4"


def test_the_truncated_line_number_is_reported():
    text = read("truncated")
    session = agentsession.loads(text)
    lines = text.rstrip("\n").split("\n")
    assert session.truncated == lines[-1] and session.truncated_at == len(lines)
    # With blank lines before the cut line, the number is still the file's.
    header, *rest = lines
    session = agentsession.loads("\n".join([header, "", *rest]))
    assert session.truncated_at == len(lines) + 1
    assert agentsession.loads(read("basic")).truncated_at == 0


# -- 4. verifying a response without request_hash ---------------------------------


def test_verifying_a_response_without_a_hash():
    s = ticking()
    s.append({"type": "config", "model": "m"})
    s.append(user("q"))
    response = s.append({"type": "response", "response_id": "r1", "status": "completed"})
    with pytest.raises(exceptions.NoHash) as caught:
        agentsession.verify_response(s, response.id)
    assert caught.value.field == response.id
    s.verify()  # the whole session skips it, as the reference does
    hashed = s.append(
        {"type": "response", "response_id": "r2", "request_hash": s.context().request_hash()}
    )
    agentsession.verify_response(s, hashed.id)


# -- 5. writing a migrated file with an unresolved extension entry ----------------


def test_a_migrated_extension_entry_is_not_written():
    legacy = agentsession.loads(read("extensions", SESSIONS / "v0.4"))
    notes = [e.legacy_id for e in legacy if e.type.startswith("agentturn:")]
    assert legacy.migrated and notes and legacy.unresolved == notes
    with pytest.raises(exceptions.UnresolvedMigration):
        agentsession.dumps(legacy)
    with pytest.raises(exceptions.UnresolvedMigration):
        legacy.check_writable()
    # A fork whose prefix holds one is refused; one above it is fine.
    note = next(e for e in legacy if e.type.startswith("agentturn:"))
    with pytest.raises(exceptions.UnresolvedMigration):
        Session.fork(legacy, {"base": legacy.path(note.id)[-1].id})
    first = legacy.entries[0]
    Session.fork(legacy, {"base": first.id})
    # A migration that rewrote everything writes as before.
    assert not agentsession.loads(read("basic", SESSIONS / "v0.4")).unresolved


# -- 6. a label without target ----------------------------------------------------


def test_a_label_without_target_is_stored_as_given():
    s = ticking()
    s.append(user("a"))
    obj = {"type": "label", "label": "note", "parent": s.leaf, "ts": "2026-09-17T13:00:00Z"}
    given = agentsession.entry_id(obj)
    result = s.append({**obj, "id": given})
    assert result.id == given and "target" not in result.entry.data
    assert s.labels() == {} and agentsession.loads(agentsession.dumps(s)).lines == s.lines
    with pytest.raises(exceptions.NoEntry):
        s.append({"type": "label", "label": "x", "target": "sha256:" + "0" * 64})


# -- helpers: compaction builders, from the fixtures' own compactions -------------


@pytest.mark.parametrize(
    "name", ["compaction", "pinned", "omit-folded", "omitted", "replay", "bad-handback-folded"]
)
def test_compaction_helpers_rebuild_the_fixture_compactions(name):
    session = agentsession.loads(read(name))
    comps = [e for e in session if e.type == "compaction"]
    assert comps
    for comp in comps:
        at = comp.parent
        assert at is not None
        summary = comp.data["summary"]
        built = agentsession.compact(session, comp.data["first_kept"], summary, at=at)
        assert built["config"] == comp.data["config"] and built["parent"] == at
        ctx = session.context_at(at)
        first = ctx.item_entries.index(comp.data["first_kept"])
        by_index = agentsession.compact_from(session, first, summary, at=at)
        keeping = agentsession.compact_keeping(session, len(ctx.items) - first, summary, at=at)
        assert by_index == keeping == built


def test_compaction_helpers_append_and_refuse():
    s = ticking()
    s.append({"type": "config", "model": "m", "instructions": "Be brief."})
    a = s.append(user("one"))
    s.append({"type": "run", "phase": "start"})  # contributes no item
    b = s.append(user("two"))
    summary = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "S"}]}
    entry = agentsession.compact_keeping(s, 1, summary)
    assert entry["first_kept"] == b.id and "parent" not in entry
    assert agentsession.compact_from(s, 1, summary) == entry
    comp = s.append(entry)
    assert s.context().items[0] == summary and s.context().item_entries == [comp.id, b.id]
    # The summary of the compaction in force cannot be "kept" by a later one.
    with pytest.raises(exceptions.ValidationError):
        agentsession.compact_from(s, 0, summary)
    with pytest.raises(exceptions.ValidationError):
        agentsession.compact_keeping(s, 3, summary)
    with pytest.raises(exceptions.NoEntry):
        agentsession.compact(s, "sha256:" + "0" * 64, summary)
    with pytest.raises(exceptions.ValidationError):
        agentsession.compact(s, a.id, "not an item")
    empty = Session.new({})
    with pytest.raises(exceptions.NoEntry):
        agentsession.compact_keeping(empty, 1, summary)


def test_checkpoint_leaves_out_unresolved_parts():
    settings = {
        "instructions": "written beside",
        "instructions_parts": [{"id": "a", "text": "x"}, {"id": "b", "hash": "sha256:00"}],
        "omit": {"reasoning": "other_models"},
    }
    out = agentsession.checkpoint(settings)
    assert out == {"instructions": "written beside", "omit": {"reasoning": "other_models"}}
    assert settings["instructions_parts"]  # the input is not changed
    resolved = {"instructions": "x", "instructions_parts": [{"id": "a", "text": "x"}]}
    assert agentsession.checkpoint(resolved) == resolved
    # Tools, reasoning and text are written in their typed shapes, so the
    # checkpoint replays to the request that was hashed.
    loose = {
        "tools": [{"type": "function", "name": "f", "acme:x": 1}],
        "reasoning": {"effort": "low"},
        "text": {},
    }
    assert agentsession.checkpoint(loose) == {
        "tools": [{"type": "function", "name": "f", "description": "", "parameters": None}],
        "reasoning": {"effort": "low", "summary": None},
    }
    assert agentsession.canonical_settings(loose) == agentsession.checkpoint(loose)
    request = agentsession.canonical_request(loose, [])
    replayed = agentsession.canonical_request(agentsession.checkpoint(loose), [])
    assert request == replayed


def test_summarise_branch_rebuilds_the_fixture_summary():
    session = agentsession.loads(read("branch"))
    (summary,) = [e for e in session if e.type == "branch_summary"]
    session.branch(str(summary.parent))
    built = agentsession.summarise_branch(session, summary.data["from"], summary.data["summary"])
    again = session.copy()
    # The fixture was generated from a 0.4 file: its line also carries legacy_id.
    result = again.append({**built, "ts": summary.ts, "legacy_id": summary.legacy_id})
    assert result.id == summary.id
    with pytest.raises(exceptions.NoEntry):
        agentsession.summarise_branch(session, "sha256:" + "0" * 64, summary.data["summary"])


# -- helpers: the context hash (RFC 0002 prefix caching) --------------------------


def conversation(s: Session, response_id: str) -> list[str]:
    ids = [s.append({"type": "config", "model": "m", "instructions": "Be brief."}).id]
    ids.append(s.append(user("hi")).id)
    ids.append(s.append({"type": "run", "phase": "start"}).id)
    out = s.append(
        {
            "type": "item",
            "response": response_id,
            "item": {"type": "message", "role": "assistant", "content": []},
        }
    )
    ids.append(out.id)
    ids.append(s.append({"type": "response", "response_id": response_id}).id)
    return ids


def test_context_hash_rules():
    s = ticking()
    cfg, hi, run, out, resp = conversation(s, "resp_1")
    h = {i: agentsession.context_hash(s, i) for i in (cfg, hi, run, out, resp)}
    assert agentsession.context_hash(s, "") == agentsession.EMPTY_CONTEXT_HASH
    assert canonical.hash_value(None) == agentsession.EMPTY_CONTEXT_HASH
    # Record entries and responses carry their parent's hash.
    assert h[run] == h[hi] and h[resp] == h[out]
    # A contributing entry: [parent's hash, type, content hash].
    content = agentsession.content_of(s.entry(hi).data)  # type: ignore[union-attr]
    assert h[hi] == canonical.hash_value([h[cfg], "item", canonical.hash_value(content)])
    # Another session at other times, other response ids: the same key.
    other = ticking("s-2", start=30)
    again = conversation(other, "resp_other")
    assert [agentsession.context_hash(other, i) for i in again] == list(h.values())
    assert again[-1] != resp  # while the ids differ
    assert agentsession.context_hashes(s.path(resp)) == list(h.values())
    # Different context, different key; an item and a config alike in body differ.
    assert agentsession.context_hash(s, s.append(user("more")).id) != h[resp]
    with pytest.raises(exceptions.NoEntry):
        agentsession.context_hash(s, "sha256:" + "0" * 64)


def test_context_hash_of_a_compaction_names_first_kept_by_its_context():
    s = ticking()
    s.append({"type": "config", "model": "m"})
    a = s.append(user("a"))
    rec = s.append({"type": "run", "phase": "start"})
    b = s.append(user("b"))
    summary = {"type": "message", "role": "user", "content": []}
    from_rec = s.copy()
    kept_a = s.append(agentsession.compact(s, a.id, summary))
    kept_rec = from_rec.append(agentsession.compact(from_rec, rec.id, summary))
    # a and its record child share a context hash, but keeping from each keeps
    # different items, so the type tells the compactions apart.
    assert agentsession.context_hash(s, a.id) == agentsession.context_hash(s, rec.id)
    assert agentsession.context_hash(s, kept_a.id) != agentsession.context_hash(
        from_rec, kept_rec.id
    )
    assert agentsession.context_hash(s, b.id) != agentsession.context_hash(s, kept_a.id)


def test_context_hash_fork_rule():
    origin = ticking("origin")
    ids = conversation(origin, "resp_1")
    tip = origin.append(user("after the base")).id
    base = ids[-1]
    left = Session.fork(origin, {"id": "left", "base": base})
    right = Session.fork(origin, {"id": "right", "base": base})
    # Every prefix entry, the base included, keys alike in the origin and forks.
    for i in origin.path(base):
        want = agentsession.context_hash(origin, i.id)
        assert agentsession.context_hash(left, i.id) == want
        assert agentsession.context_hash(right, i.id) == want
    # Past the base, siblings agree exactly while they append the same context.
    left.clock = lambda: "2026-09-18T00:00:00Z"
    right.clock = lambda: "2026-09-19T00:00:00Z"
    l1, r1 = left.append(user("same")), right.append(user("same"))
    assert l1.id != r1.id
    assert agentsession.context_hash(left, l1.id) == agentsession.context_hash(right, r1.id)
    assert agentsession.context_hash(left, l1.id) != agentsession.context_hash(origin, tip)
    r2 = right.append(user("different"))
    assert agentsession.context_hash(right, r2.id) != agentsession.context_hash(left, l1.id)


# -- helpers: leaves, extra, canonical tools ---------------------------------------


def test_leaves():
    session = agentsession.loads(read("branch"))
    leaves = session.leaves()
    assert len(leaves) >= 2  # the fixture has an abandoned branch
    for leaf in leaves:
        assert session.children(leaf) == []
    every = {e.id for e in session}
    with_children = {e.parent for e in session if e.parent}
    assert set(leaves) == every - with_children
    assert leaves == [e.id for e in session if e.id in set(leaves)]  # file order
    assert Session.new({}).leaves() == []


def test_extra_helpers():
    config: dict[str, Any] = {"type": "config", "model": "m"}
    agentsession.set_extra(config, "temperature", 0.5)
    agentsession.set_extra(config, "acme:tags", ["a"])
    s = ticking()
    s.append(config)
    settings = s.context().settings
    assert agentsession.extra_value(settings, "temperature", float) == 0.5
    assert agentsession.extra_value(settings, "acme:tags", list) == ["a"]
    assert agentsession.extra_value(settings, "missing", str) is None
    with pytest.raises(exceptions.ValidationError):
        agentsession.extra_value(settings, "temperature", str)
    assert s.context().request()["temperature"] == 0.5
    s.append(agentsession.clear_extra({"type": "config"}, "temperature"))
    assert agentsession.extra_value(s.context().settings, "temperature") is None
    assert "temperature" not in s.context().request()
    with pytest.raises(exceptions.ValidationError):
        agentsession.set_extra({}, "t", None)
    with pytest.raises(exceptions.ValidationError):
        agentsession.set_extra({}, "t", float("nan"))
    assert agentsession.extra_value({"extra": {"n": 2}}, "n", float) == 2.0
    with pytest.raises(exceptions.ValidationError):
        agentsession.extra_value({"extra": {"n": True}}, "n", int)


def test_canonical_tool_shapes():
    loose = {"type": "function", "name": "f", "acme:x": 1, "strict": True}
    assert agentsession.canonical_tool(loose) == {
        "type": "function",
        "name": "f",
        "description": "",
        "parameters": None,
        "strict": True,
    }
    other = {"type": "web_search", "acme:x": 1}
    assert agentsession.canonical_tool(other) is other
    untyped = {"name": "f"}
    assert agentsession.canonical_tool(untyped) is untyped
    full = {
        "type": "function",
        "name": "f",
        "description": "d",
        "parameters": {"type": "object"},
    }
    request = agentsession.canonical_request({"tools": [loose, full]}, [])
    assert request["tools"] == [agentsession.canonical_tool(loose), full]
    # Two spellings of one tool hash alike; reasoning and text take their shapes.
    tidy = agentsession.canonical_request(
        {"tools": [{**full, "acme:y": 2}], "reasoning": {"effort": "low"}}, []
    )
    assert tidy["tools"] == [full] and tidy["reasoning"] == {"effort": "low", "summary": None}
    assert "reasoning" not in agentsession.canonical_request({"reasoning": {"summary": None}}, [])
    assert agentsession.canonical_request({"text": {"verbosity": "low"}}, [])["text"] == {
        "format": {"type": "text"},
        "verbosity": "low",
    }


def test_fixture_request_hashes_still_verify_with_canonical_tools():
    for name in ("basic", "runs", "omit", "handback", "parts", "queued"):
        agentsession.loads(read(name)).verify()


# -- the durable leaf mark: what clears it ------------------------------------------


def test_only_a_null_label_on_the_marked_entry_clears_the_mark():
    s = ticking()
    a = s.append(user("a")).id
    b = s.append(user("b")).id
    s.append(user("c"))

    def label(target: str, value: str | None) -> str:
        # Hung from a, off b's subtree, so no line extends the marked branch.
        return s.append({"type": "label", "target": target, "label": value, "parent": a}).id

    label(a, "leaf")
    label(b, "leaf")
    # A bookmark on the marked entry keeps the mark; a read resumes at b.
    label(b, "bookmark")
    assert agentsession.loads(agentsession.dumps(s)).leaf == b
    # Clearing a, which is no longer marked, changes nothing either.
    label(a, None)
    assert agentsession.loads(agentsession.dumps(s)).leaf == b
    # A null label on b clears the mark, and no earlier mark comes back: the
    # leaf is the last line's.
    cleared = label(b, None)
    assert agentsession.loads(agentsession.dumps(s)).leaf == cleared


# -- the package's import graph ----------------------------------------------------


def test_the_format_modules_import_one_another_without_a_cycle():
    import ast

    package = Path(agentsession.__file__).resolve().parent
    prefix = "agentstore.formats.agentsession"
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        if path.stem == "__init__":
            continue
        deps: set[str] = set()
        # Every import, function-level ones included.
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("django"), path.name
                if node.module.startswith(prefix + "."):
                    deps.add(node.module.rsplit(".", 1)[1])
                elif node.module == prefix:
                    deps.update(alias.name for alias in node.names)
        graph[path.stem] = deps - {path.stem}
    assert {"legacy", "context_hash", "compaction"} <= set(graph)
    done: set[str] = set()
    for start in graph:
        # Iterative depth-first search for a path back to ``start``.
        stack, seen = list(graph[start]), set()
        while stack:
            node = stack.pop()
            assert node != start, f"import cycle through {start}"
            if node in seen or node in done:
                continue
            seen.add(node)
            stack.extend(graph.get(node, ()))
        done.add(start)


def test_blank_lines_before_the_header_are_skipped_too():
    text = read("basic")
    session = agentsession.loads("\n\r\n" + text)
    assert session.lines == agentsession.loads(text).lines
    header, first, *rest = text.splitlines()
    with pytest.raises(exceptions.ValidationError) as caught:
        agentsession.loads("\n".join(["", header, first, "{cut", *rest]))
    assert caught.value.field == "line 4"
    with pytest.raises(exceptions.ValidationError):
        agentsession.loads("\n \n")


def test_legacy_reference_members_are_rewritten_per_type():
    header = {
        "type": "session",
        "format": "agentsession/0.4",
        "id": "legacy-1",
        "created_at": "2026-09-17T12:00:00Z",
        "payload": "openresponses/2026-04-24",
    }
    q = {
        "type": "queued",
        "id": "q1",
        "parent": None,
        "ts": "2026-09-17T12:00:00Z",
        "kind": "steer",
    }
    item = {
        **user("hi"),
        "id": "i1",
        "parent": "q1",
        "ts": "2026-09-17T12:00:01Z",
        "queued_from": "q1",
    }
    label = {"type": "label", "id": "l1", "parent": "i1", "ts": "2026-09-17T12:00:02Z"}
    lines = [header, q, item, {**label, "target": "i1", "label": "keep"}]
    session = agentsession.loads("\n".join(canonical.dumps(x).decode() for x in lines) + "\n")
    by_legacy = {e.legacy_id: e for e in session}
    assert by_legacy["i1"].data["queued_from"] == by_legacy["q1"].id
    assert by_legacy["l1"].data["target"] == by_legacy["i1"].id
    assert session.unresolved == [] and agentsession.dumps(session)
    # A reference naming no earlier entry cannot be rewritten: it reads, but
    # is not written back.
    dangling = [header, q, {**label, "parent": "q1", "target": "gone", "label": "x"}]
    text = "\n".join(canonical.dumps(x).decode() for x in dangling) + "\n"
    dangling_session = agentsession.loads(text)
    assert dangling_session.unresolved == ["l1"]
    with pytest.raises(exceptions.UnresolvedMigration):
        agentsession.dumps(dangling_session)

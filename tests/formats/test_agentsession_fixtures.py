"""The upstream agentsession fixtures (``tests/data/agentsession``; see its README).

Every session file must read, verify and write back byte for byte; every
context fixture must match the context rebuilt at each of its leaves; every
negative or edge fixture must be refused or accepted as ``EXPECTATIONS.md``
says; the pre-0.5 copies must migrate to the same ids the generated files have.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentstore import exceptions
from agentstore.formats import agentsession
from agentstore.formats.agentsession import Session

DATA = Path(__file__).resolve().parent.parent / "data" / "agentsession"
SESSIONS = DATA / "sessions"

NEGATIVE = {
    "bad-parent": exceptions.NoEntry,
    "bad-parents": exceptions.BadConvergence,
    "bad-base-parent": exceptions.BaseRule,
    "bad-base-prefix": exceptions.BaseRule,
    "bad-base-root": exceptions.BaseRule,
    "corrupt-middle": exceptions.ValidationError,
    "missing-id": exceptions.BadID,
    "unsupported-format": exceptions.ValidationError,
}
# Read fine; refused later, when verifying or building the context.
LATE = {"bad-first-kept", "bad-omit"}
# Files whose writing back is not byte-identical, on purpose.
NOT_IDENTICAL = {
    "duplicate-id": "the repeated line is held once",
    "truncated": "the cut final line is dropped",
    "pinned": "format 0.3: migrated in memory",
}
# Migrated files that read but must not be written back (UnresolvedMigration).
NOT_WRITABLE = {
    "fork": "format 0.4 whose parents name another session's entry by its old id",
}


def read(name: str) -> str:
    return (SESSIONS / f"{name}.jsonl").read_text(encoding="utf-8")


def good_sessions() -> list[str]:
    return sorted(
        p.stem for p in SESSIONS.glob("*.jsonl") if p.stem not in NEGATIVE and p.stem not in LATE
    )


def context_fixtures() -> list[str]:
    return sorted(p.stem for p in (DATA / "context").glob("*.json"))


def test_fixture_copies_present():
    # CI cannot read /work/shared: the copies must be in the repository.
    assert len(good_sessions()) >= 25 and len(context_fixtures()) == 21


@pytest.mark.parametrize("name", good_sessions())
def test_session_reads_verifies_and_round_trips(name):
    text = read(name)
    session = agentsession.loads(text)
    session.verify()
    assert session.leaf in session
    if name in NOT_WRITABLE:
        assert session.migrated and session.unresolved
        with pytest.raises(exceptions.UnresolvedMigration):
            agentsession.dumps(session)
        return
    if name in NOT_IDENTICAL:
        assert agentsession.dumps(session) != text
    else:
        assert agentsession.dumps(session) == text
    # Writing back is stable: a second round trip is byte-identical.
    again = agentsession.dumps(agentsession.loads(agentsession.dumps(session)))
    assert again == agentsession.dumps(session)


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_negative_fixture_refused(name):
    with pytest.raises(NEGATIVE[name]):
        agentsession.loads(read(name))


def test_bad_base_rule_is_also_no_entry():
    with pytest.raises(exceptions.NoEntry):
        agentsession.loads(read("bad-base-root"))


def test_bad_first_kept_refused_when_building_context():
    session = agentsession.loads(read("bad-first-kept"))
    compaction = next(e for e in session if e.type == "compaction")
    with pytest.raises(exceptions.NoEntry, match="first_kept"):
        session.context_at(compaction.id)
    # An append that does the same is refused up front.
    with pytest.raises(exceptions.NoEntry, match="first_kept"):
        session.append(
            {**{k: v for k, v in compaction.data.items() if k != "id"}, "ts": compaction.ts}
        )


def test_bad_omit_is_a_hash_mismatch():
    session = agentsession.loads(read("bad-omit"))
    with pytest.raises(exceptions.HashMismatch):
        session.verify()
    assert issubclass(exceptions.HashMismatch, exceptions.BadID)


def test_truncated_is_reported():
    text = read("truncated")
    session = agentsession.loads(text)
    assert session.truncated == text.rstrip("\n").rsplit("\n", 1)[1]
    assert session.truncated.startswith('{"id":"sha256:7b2c1e')
    assert len(session) == len(text.rstrip("\n").split("\n")) - 2
    assert agentsession.dumps(session) == text[: text.rstrip("\n").rfind("\n") + 1]
    with pytest.raises(exceptions.ValidationError):
        agentsession.loads(text, tolerate_truncated=False)


def test_duplicate_id_held_once():
    text = read("duplicate-id")
    session = agentsession.loads(text)
    assert len(session) == len(text.strip().split("\n")) - 2
    assert len(session.duplicates) == 1 and session.duplicates[0] in session


def test_corrupt_middle_names_the_line():
    with pytest.raises(exceptions.ValidationError) as exc:
        agentsession.loads(read("corrupt-middle"))
    assert exc.value.field.startswith("line ")


@pytest.mark.parametrize(
    "name", ["bad-resume", "bad-records", "bad-handback", "bad-handback-folded"]
)
def test_edge_fixtures_accepted(name):
    session = agentsession.loads(read(name))
    session.verify()


def _leaf_ids(session: Session, key: str) -> str:
    if key.startswith("sha256:"):
        return key
    return next(e.id for e in session if e.legacy_id == key)


@pytest.mark.parametrize("name", context_fixtures())
def test_context_fixture(name):
    session = agentsession.loads(read(name))
    expected = json.loads((DATA / "context" / f"{name}.json").read_text(encoding="utf-8"))
    legacy = {e.id: e.legacy_id for e in session if e.legacy_id}
    for key, want in expected.items():
        got = session.context_at(_leaf_ids(session, key)).as_fixture()
        if not key.startswith("sha256:"):
            # The six oldest fixtures are keyed by legacy ids (see README).
            for member in ("entries", "item_entries"):
                got[member] = [legacy.get(i, i) for i in got[member]]
        if name == "instructions":
            # This fixture predates instructions_omitted in the settings
            # (generated at upstream commit 0705251f); newer ones carry it.
            got["settings"].pop("instructions_omitted", None)
        for member, value in want.items():
            assert got[member] == value, f"{name} at {key}: {member}"
        assert set(got) - set(want) <= {"item_entries"}


def test_context_fixtures_cover_omit_records():
    session = agentsession.loads(read("omit"))
    ctx = session.context()
    assert {o["reason"] for o in ctx.omitted} == {"other_models", "items"}
    assert len(ctx.items) == len(ctx.item_entries)


@pytest.mark.parametrize(
    "name", ["basic", "branch", "compaction", "extensions", "instructions", "bad-first-kept"]
)
def test_legacy_copy_migrates_to_the_generated_ids(name):
    legacy = agentsession.loads((SESSIONS / "v0.4" / f"{name}.jsonl").read_text(encoding="utf-8"))
    assert legacy.migrated
    current = agentsession.loads(read(name))
    # Migrating in memory gives exactly the ids (and lines) the upstream
    # generator wrote into the current-format file.
    assert [(e.legacy_id, e.id) for e in legacy] == [(e.legacy_id, e.id) for e in current]
    assert legacy.lines == current.lines


def test_legacy_migration_rewrites_references():
    session = agentsession.loads(read("pinned"))
    assert session.migrated and session.header["format"] == "agentsession/0.11"
    for e in session:
        assert agentsession.is_hash_id(e.id) and e.legacy_id
        assert e.parent is None or agentsession.is_hash_id(e.parent)
    compaction = next(e for e in session if e.type == "compaction")
    assert compaction.get("first_kept") in session
    # The migrated session writes out as a current file that reads back the same.
    again = agentsession.loads(agentsession.dumps(session))
    assert again.lines == session.lines and not again.migrated


@pytest.mark.parametrize("name", ["bad-parent", "bad-parents", "missing-id"])
def test_legacy_negative_copies_refused(name):
    with pytest.raises(exceptions.AgentStoreError):
        agentsession.loads((SESSIONS / "v0.4" / f"{name}.jsonl").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", [n for n in good_sessions() if n not in ("fork", "pinned")])
def test_reappending_every_entry_gives_the_same_file(name):
    # The writer's rules (call rules, convergence, base rule) accept every
    # well-formed fixture, and hash each entry to the id the file has.
    source = agentsession.loads(read(name))
    copy = Session(dict(source.header), header_line=source.header_line)
    for e in source:
        result = copy.append(dict(e.data))
        assert result.id == e.id and result.line == e.line
    assert agentsession.dumps(copy) == agentsession.dumps(source)


def test_records_problems_are_reported_not_raised():
    bad_resume = agentsession.loads(read("bad-resume"))
    (problem,) = bad_resume.check_records()
    assert "call_charge" in problem and "resumed" in problem
    bad_records = agentsession.loads(read("bad-records"))
    (problem,) = bad_records.check_records()
    assert "call_1" in problem and "no dispatch" in problem
    # The well-kept fixtures report nothing: refused and cut resumes that
    # write nothing are fine, and so is the resume that takes the call up.
    for name in good_sessions():
        if not name.startswith("bad-"):
            assert agentsession.loads(read(name)).check_records() == [], name

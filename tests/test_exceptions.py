"""The exception hierarchy: one class per failure, stable codes, the data callers need."""

from __future__ import annotations

import inspect

from django.db.utils import OperationalError

from agentstore import exceptions as e


def all_errors() -> list[type[e.AgentStoreError]]:
    return [
        cls
        for _, cls in inspect.getmembers(e, inspect.isclass)
        if issubclass(cls, e.AgentStoreError)
    ]


def test_every_error_is_an_agentstore_error_with_its_own_code() -> None:
    errors = all_errors()
    codes = [cls.code for cls in errors]

    assert len(errors) > 30
    assert len(set(codes)) == len(codes)
    assert all(code and code == code.lower() for code in codes)


def test_the_design_sentinels_exist() -> None:
    for name in [
        "NoSession",
        "SessionExists",
        "SessionLocked",
        "ConcurrentWriter",
        "ReadOnly",
        "NoEntry",
        "BadID",
        "BaseRule",
        "NoRef",
        "RefMoved",
        "RefNameError",
        "StaleCompactionParent",
        "ValidationError",
    ]:
        assert issubclass(getattr(e, name), e.AgentStoreError), name


def test_errors_carry_their_data() -> None:
    stale = e.StaleCompactionParent(winner_entry_id="abc")
    assert (stale.code, stale.winner_entry_id, str(stale)) == (
        "stale_compaction_parent",
        "abc",
        "stale compaction parent",
    )
    moved = e.RefMoved("ref main moved", name="main", current=("s", ""))
    assert (moved.name, moved.current, str(moved)) == ("main", ("s", ""), "ref main moved")
    invalid = e.ValidationError("session.cwd is required", field="session.cwd")
    assert invalid.field == "session.cwd"
    assert isinstance(invalid, ValueError)
    dangling = e.NoSession(target=("s", "x"))
    assert dangling.target == ("s", "x")


def test_subclass_relations_follow_the_sentinels() -> None:
    assert issubclass(e.BaseRule, e.NoEntry)  # ErrBaseRule also matches ErrNoEntry
    assert issubclass(e.RefNameError, e.ValidationError)
    assert issubclass(e.HashMismatch, e.BadID)
    assert issubclass(e.DatabaseBusy, OperationalError)
    assert issubclass(e.CallIDEmpty, e.CallRuleError)

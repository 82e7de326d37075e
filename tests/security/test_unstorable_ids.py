"""An id that could never have been stored is "missing" on every backend, never a ``DataError``.

PostgreSQL text cannot hold NUL and psycopg refuses to send it (a raw
``django.db.utils.DataError``); a lone surrogate is not UTF-8. SQLite would
simply find nothing. Every public lookup of the stores and task repositories
therefore answers such an id with its own "missing" answer — ``None``, ``[]``,
``False``, ``NoSession``, ``NoEntry`` — the same on both backends (the
``lookup`` rule in ``agentstore/stores/base.py``). The table below names each
call with its expected answer; the suite runs it on SQLite and on PostgreSQL.
Writes keep refusing such values with ``ValidationError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentstore.exceptions import AgentStoreError, NoEntry, NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.stores.documents import DocumentStore
from agentstore.stores.log import LogStore
from agentstore.stores.loop import LoopSession, LoopStore
from agentstore.stores.refs import RefStore
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree import TreeStore
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.types.tree import MessageEntity

pytestmark = pytest.mark.django_db

#: A NUL (PostgreSQL cannot hold it) and a lone surrogate (not UTF-8).
BAD_IDS = ["a\x00b", "a\ud800b"]


@dataclass(frozen=True)
class Raises:
    """The call raises ``error`` with this message (``{bad}``, ``{tree}``, ``{entry}`` filled).

    ``message`` ``None``: any message (the name checks word their own).
    """

    error: type[AgentStoreError]
    message: str | None


@dataclass
class Place:
    """What a call may name besides the bad id: a tree session with one entry."""

    bad: str
    tree: str
    entry: str


Call = Callable[[Place], Any]


NO_SESSION = Raises(NoSession, "no such session: {bad}")
INVALID = Raises(ValidationError, None)

#: (name, call, expected answer): every public lookup by a caller-given id.
LOOKUPS: list[tuple[str, Call, Any]] = [
    # TreeStore: sessions
    ("tree.get_session", lambda p: TreeStore().get_session(p.bad), None),
    ("tree.latest_session(cwd)", lambda p: TreeStore().latest_session(p.bad), None),
    ("tree.list_sessions(cwd)", lambda p: TreeStore().list_sessions(p.bad), []),
    ("tree.list_child_sessions", lambda p: TreeStore().list_child_sessions(p.bad), []),
    ("tree.delete_session", lambda p: TreeStore().delete_session(p.bad), NO_SESSION),
    # TreeStore: entries
    ("tree.entry(session)", lambda p: TreeStore().entry(p.bad, p.entry), None),
    ("tree.entry(entry)", lambda p: TreeStore().entry(p.tree, p.bad), None),
    ("tree.entries", lambda p: TreeStore().entries(p.bad), []),
    ("tree.entries_after", lambda p: TreeStore().entries_after(p.bad, 0, 5), []),
    ("tree.leaf_entry", lambda p: TreeStore().leaf_entry(p.bad), None),
    ("tree.children(session)", lambda p: TreeStore().children(p.bad, None), []),
    ("tree.children(parent)", lambda p: TreeStore().children(p.tree, p.bad), []),
    ("tree.branch(session)", lambda p: TreeStore().branch(p.bad), []),
    (
        "tree.branch(session, entry)",
        lambda p: TreeStore().branch(p.bad, p.entry),
        Raises(NoEntry, 'entry "{entry}" not found in session "{bad}"'),
    ),
    (
        "tree.branch(entry)",
        lambda p: TreeStore().branch(p.tree, p.bad, limit=5),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    ("tree.branch_length(session)", lambda p: TreeStore().branch_length(p.bad), 0),
    (
        "tree.branch_length(entry)",
        lambda p: TreeStore().branch_length(p.tree, p.bad),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    ("tree.tree", lambda p: TreeStore().tree(p.bad), []),
    ("tree.tree_page(session)", lambda p: TreeStore().tree_page(p.bad), []),
    (
        "tree.tree_page(after)",
        lambda p: TreeStore().tree_page(p.tree, p.bad),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    ("tree.label", lambda p: TreeStore().label(p.bad, p.entry), None),
    ("tree.messages", lambda p: TreeStore().messages(p.bad), []),
    ("tree.transcript_messages", lambda p: TreeStore().transcript_messages(p.bad), []),
    ("tree.messages_page(session)", lambda p: TreeStore().messages_page(p.bad), []),
    (
        "tree.messages_page(after)",
        lambda p: TreeStore().messages_page(p.tree, p.bad),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    (
        "tree.message_for_entry(session)",
        lambda p: TreeStore().message_for_entry(p.bad, p.entry),
        None,
    ),
    ("tree.message_for_entry(entry)", lambda p: TreeStore().message_for_entry(p.tree, p.bad), None),
    (
        "tree.context_has_image_parts(session)",
        lambda p: TreeStore().context_has_image_parts(p.bad, p.entry),
        False,
    ),
    (
        "tree.context_has_image_parts(entry)",
        lambda p: TreeStore().context_has_image_parts(p.tree, p.bad),
        False,
    ),
    (
        "tree.build_context(session)",
        lambda p: TreeStore().build_context(p.bad, p.entry),
        Raises(NoEntry, 'entry "{entry}" not found in session "{bad}"'),
    ),
    (
        "tree.build_context(leaf)",
        lambda p: TreeStore().build_context(p.tree, p.bad),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    (
        "tree.context_length(leaf)",
        lambda p: TreeStore().context_length(p.tree, p.bad),
        Raises(NoEntry, 'entry "{bad}" not found in session "{tree}"'),
    ),
    (
        "tree.delete_entry_branch(session)",
        lambda p: TreeStore().delete_entry_branch(p.bad, p.entry),
        None,
    ),
    # TreeStore: appends look their session up
    (
        "tree.append_message",
        lambda p: TreeStore().append_message(p.bad, None, MessageEntity(role="user", content="hi")),
        NO_SESSION,
    ),
    (
        "tree.append_model_change",
        lambda p: TreeStore().append_model_change(p.bad, None, "openai", "gpt"),
        NO_SESSION,
    ),
    (
        "tree.append_custom_message",
        lambda p: TreeStore().append_custom_message(p.bad, None, "note", "hi", True),
        NO_SESSION,
    ),
    # SessionStore
    ("sessions.get", lambda p: SessionStore().get(p.bad), None),
    ("sessions.get(kind)", lambda p: SessionStore().get(p.tree, p.bad), None),
    ("sessions.kind_of", lambda p: SessionStore().kind_of(p.bad), None),
    ("sessions.list(kind)", lambda p: SessionStore().list(p.bad), []),
    ("sessions.list(cwd)", lambda p: SessionStore().list(cwd=p.bad), []),
    ("sessions.list(parent)", lambda p: SessionStore().list(parent_session=p.bad), []),
    ("sessions.transfer", lambda p: SessionStore().transfer(p.bad, None), False),
    ("sessions.delete", lambda p: SessionStore().delete(p.bad), NO_SESSION),
    ("sessions.hold", lambda p: SessionStore().hold(p.bad), None),
    ("sessions.break_hold", lambda p: SessionStore().break_hold(p.bad), False),
    ("sessions.export_row", lambda p: SessionStore().export_row(p.bad), None),
    # LoopStore
    ("loop.steps", lambda p: LoopStore().steps(p.bad), []),
    ("loop.last_n", lambda p: LoopStore().last_n(p.bad, 5), []),
    ("loop.get", lambda p: LoopStore().get(p.bad), LoopSession()),
    ("loop.exists", lambda p: LoopStore().exists(p.bad), False),
    ("loop.grants", lambda p: LoopStore().grants(p.bad), []),
    ("loop.is_granted(session)", lambda p: LoopStore().is_granted(p.bad, "ls"), False),
    ("loop.is_granted(prompt)", lambda p: LoopStore().is_granted(p.tree, p.bad), False),
    (
        "loop.export_rows",
        lambda p: list(LoopStore().export_rows(p.bad)),
        Raises(NoSession, "no such loop session: {bad}"),
    ),
    # LogStore
    ("log.read", lambda p: LogStore().read(p.bad), NO_SESSION),
    ("log.tail", lambda p: LogStore().tail(p.bad, 5), NO_SESSION),
    ("log.read_page", lambda p: LogStore().read_page(p.bad), NO_SESSION),
    ("log.export_jsonl", lambda p: LogStore().export_jsonl(p.bad), NO_SESSION),
    ("log.open", lambda p: LogStore().open(p.bad), NO_SESSION),
    ("log.append", lambda p: LogStore().append(p.bad, {"type": "info", "name": "x"}), NO_SESSION),
    ("log.continue_session", lambda p: LogStore().continue_session(p.bad), NO_SESSION),
    ("log.delete", lambda p: LogStore().delete(p.bad), NO_SESSION),
    ("log.follow", lambda p: next(iter(LogStore().follow(p.bad))), NO_SESSION),
    ("log.lock_holder", lambda p: LogStore().lock_holder(p.bad), None),
    ("log.break_lock", lambda p: LogStore().break_lock(p.bad), False),
    (
        "log.afollow",
        lambda p: asyncio.run(anext(aiter(LogStore().afollow(p.bad)))),
        NO_SESSION,
    ),
    # RefStore and DocumentStore check their names first (docs/api.md "Names"): a
    # ValidationError (RefNameError is one) on both backends, before any lookup.
    ("refs.resolve_ref", lambda p: RefStore().resolve_ref(p.bad), INVALID),
    ("refs.ref_log", lambda p: RefStore().ref_log(p.bad), INVALID),
    ("refs.count_ref_log", lambda p: RefStore().count_ref_log(p.bad), INVALID),
    ("refs.list_refs(prefix)", lambda p: RefStore().list_refs(p.bad), INVALID),
    ("refs.list_refs(after)", lambda p: RefStore().list_refs(after=p.bad), INVALID),
    ("documents.get(namespace)", lambda p: DocumentStore().get(p.bad, "k"), INVALID),
    ("documents.get(key)", lambda p: DocumentStore().get("ns", p.bad), INVALID),
    ("documents.delete(key)", lambda p: DocumentStore().delete("ns", p.bad), INVALID),
    # CheckpointStore (LangGraph threads)
    ("checkpoints.get(thread)", lambda p: CheckpointStore().get(p.bad), None),
    ("checkpoints.get(ns)", lambda p: CheckpointStore().get(p.tree, p.bad), None),
    ("checkpoints.get(id)", lambda p: CheckpointStore().get(p.tree, "", p.bad), None),
    ("checkpoints.list(thread)", lambda p: list(CheckpointStore().list(p.bad)), []),
    ("checkpoints.list(ns)", lambda p: list(CheckpointStore().list(None, p.bad)), []),
    ("checkpoints.list(before)", lambda p: list(CheckpointStore().list(before=p.bad)), []),
    ("checkpoints.writes_of", lambda p: CheckpointStore().writes_of(p.bad, "", "x"), []),
    ("checkpoints.copy_thread", lambda p: CheckpointStore().copy_thread(p.bad, new_id()), False),
    ("checkpoints.delete_thread", lambda p: CheckpointStore().delete_thread(p.bad), NO_SESSION),
    ("checkpoints.delete_for_runs", lambda p: CheckpointStore().delete_for_runs([p.bad]), 0),
    ("checkpoints.prune", lambda p: CheckpointStore().prune([p.bad]), None),
    # TaskRepository
    ("tasks.get", lambda p: TaskRepository().get(p.bad), None),
    ("tasks.latest_event", lambda p: TaskRepository().latest_event(p.bad), None),
    ("tasks.list_events", lambda p: TaskRepository().list_events(p.bad), []),
    ("tasks.list_owned(owner)", lambda p: TaskRepository().list_owned(p.bad), []),
    ("tasks.list_owned(kinds)", lambda p: TaskRepository().list_owned(p.tree, [p.bad]), []),
    ("tasks.list_by_owner(kind)", lambda p: TaskRepository().list_by_owner(p.bad, p.tree), []),
    ("tasks.list_by_owner(owner)", lambda p: TaskRepository().list_by_owner("tool", p.bad), []),
    (
        "tasks.list_by_states(kind)",
        lambda p: TaskRepository().list_by_states(p.bad, ["queued"]),
        [],
    ),
    ("tasks.list_queued_excluding", lambda p: TaskRepository().list_queued_excluding([p.bad]), []),
    ("tasks.release(task)", lambda p: TaskRepository().release(p.bad, "worker"), False),
    ("tasks.release(owner)", lambda p: TaskRepository().release(new_id(), p.bad), False),
    # AgentTaskRepository
    ("agents.get", lambda p: AgentTaskRepository().get(p.bad), None),
    ("agents.exists", lambda p: AgentTaskRepository().exists(p.bad), False),
    ("agents.list_by_owner", lambda p: AgentTaskRepository().list_by_owner(p.bad), []),
    ("agents.list_by_ids", lambda p: AgentTaskRepository().list_by_ids([p.bad]), []),
    # ToolTaskRepository (its ids are UUIDv7: a bad one is a ValidationError)
    (
        "tools.get",
        lambda p: ToolTaskRepository().get(p.bad),
        Raises(ValidationError, "tool_task.task_id must be a UUIDv7"),
    ),
    (
        "tools.get_by_invocation",
        lambda p: ToolTaskRepository().get_by_invocation(new_id(), p.bad),
        None,
    ),
    ("tools.list_by_ids", lambda p: ToolTaskRepository().list_by_ids([p.bad]), []),
    # WorkflowRepository
    ("workflows.get", lambda p: WorkflowRepository().get(p.bad), None),
    ("workflows.list_by_ids", lambda p: WorkflowRepository().list_by_ids([p.bad]), []),
    ("workflows.list_by_owner", lambda p: WorkflowRepository().list_by_owner(p.bad), []),
    (
        "workflows.list_active_by_owner",
        lambda p: WorkflowRepository().list_active_by_owner(p.bad),
        [],
    ),
    (
        "workflows.find_agent_task(workflow)",
        lambda p: WorkflowRepository().find_agent_task(p.bad, "n", 0),
        None,
    ),
    (
        "workflows.find_agent_task(node)",
        lambda p: WorkflowRepository().find_agent_task(new_id(), p.bad, 0),
        None,
    ),
    ("workflows.list_agent_tasks", lambda p: WorkflowRepository().list_agent_tasks(p.bad), []),
    (
        "workflows.list_agent_task_details",
        lambda p: WorkflowRepository().list_agent_task_details([p.bad]),
        [],
    ),
]

#: Writes of such a value refuse it (``ValidationError``) before the database sees it.
WRITES: list[tuple[str, Call]] = [
    ("tree.create_session(cwd)", lambda p: TreeStore().create_session(p.bad)),
    ("tree.create_session(name)", lambda p: TreeStore().create_session("/repo", name=p.bad)),
    (
        "tree.create_session(parent)",
        lambda p: TreeStore().create_session("/repo", parent_session=p.bad),
    ),
    ("sessions.create(id)", lambda p: SessionStore().create("tree", session_id=p.bad)),
    ("loop.update_data", lambda p: LoopStore().update_data(p.bad, None)),
    ("loop.grant", lambda p: LoopStore().grant(p.bad, "ls")),
    ("log.create", lambda p: LogStore().create({"id": p.bad})),
]


@pytest.fixture
def place(request: pytest.FixtureRequest) -> Callable[[str], Place]:
    def make(bad: str) -> Place:
        tree = TreeStore()
        session = tree.create_session("/repo")
        entry = tree.append_message(session.id, None, MessageEntity(role="user", content="hi"))
        return Place(bad=bad, tree=session.id, entry=entry.id)

    return make


@pytest.mark.parametrize("bad", BAD_IDS, ids=["nul", "surrogate"])
@pytest.mark.parametrize(("name", "call", "expected"), LOOKUPS, ids=[row[0] for row in LOOKUPS])
def test_a_lookup_by_an_unstorable_id_is_missing(
    place: Callable[[str], Place], bad: str, name: str, call: Call, expected: Any
) -> None:
    p = place(bad)
    if isinstance(expected, Raises):
        with pytest.raises(expected.error) as caught:
            call(p)
        if expected.message is not None:
            wanted = expected.message.format(bad=bad, tree=p.tree, entry=p.entry)
            assert str(caught.value) == wanted
    else:
        assert call(p) == expected


@pytest.mark.parametrize("bad", BAD_IDS, ids=["nul", "surrogate"])
@pytest.mark.parametrize(("name", "call"), WRITES, ids=[row[0] for row in WRITES])
def test_a_write_of_an_unstorable_value_is_refused(
    place: Callable[[str], Place], bad: str, name: str, call: Call
) -> None:
    with pytest.raises(ValidationError):
        call(place(bad))


def test_the_lookups_keep_finding_what_is_stored() -> None:
    # The rule answers only for unstorable ids: a stored one is still found.
    tree = TreeStore()
    session = tree.create_session("/repo")
    entry = tree.append_message(session.id, None, MessageEntity(role="user", content="hi"))
    assert tree.entry(session.id, entry.id) == entry
    assert [e.id for e in tree.branch(session.id, entry.id)] == [entry.id]
    assert SessionStore().kind_of(session.id) == "tree"
    assert TaskRepository().list_owned(session.id, ["tool", "a\x00b"]) == []

"""The errors agentstore raises, one class per failure a caller can act on.

Every error derives from :class:`AgentStoreError` and carries a stable, machine
readable ``code`` fixed where the error is defined, so wrapping and re-raising
never changes it (the Go stores we re-implement have the same rule: "the deepest
code wins")::

    from agentstore import exceptions

    try:
        store.append_compaction(compaction)
    except exceptions.StaleCompactionParent as exc:
        use(exc.winner_entry_id)

Each class is a few declarations on :class:`AgentStoreError`: its ``code``,
``default_message``, the HTTP ``status`` the API answers with (inherited, so
``NoTask`` subclasses are 404 too), and the keyword attributes it carries
(declared as annotated class attributes and listed in ``details``; the API
puts the non-empty ones in the error body's ``details``). The base's
constructor sets them, so no class repeats an ``__init__``.

"Not found" on a single-row read is *not* an error (it returns ``None``), and a
conditional state change that did not apply returns ``False``; exceptions are
for bad input, conflicts and refusals.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.utils import IntegrityError, OperationalError


class AgentStoreError(Exception):
    """Base class of every agentstore error.

    ``message`` defaults to the class's ``default_message``; keyword arguments
    set the attributes the class lists in ``details`` (each declared on the
    class with its default), and any other keyword is a ``TypeError``, as a
    hand-written ``__init__`` would raise.
    """

    code: str = "agentstore_error"
    default_message: ClassVar[str] = "agentstore error"
    #: The HTTP status ``agentstore.api.exceptions`` answers with (a caller's
    #: error unless a class says otherwise).
    status: ClassVar[int] = 400
    #: The keyword attributes this error carries (see the class's annotations).
    details: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str | None = None, **details: Any) -> None:
        unknown = set(details) - set(self.details)
        if unknown:
            raise TypeError(f"{type(self).__name__} takes no argument {', '.join(sorted(unknown))}")
        for name, value in details.items():
            setattr(self, name, value)
        self.message = message or self.default_message
        super().__init__(self.message)


# -- bad input ---------------------------------------------------------------


class ValidationError(AgentStoreError, ValueError):
    """Input was rejected before anything was written.

    ``field`` names the offending input (``"session.cwd"``, ``"message.parts[1]"``)
    so API and command layers can point at it.
    """

    code = "validation_error"
    default_message = "invalid input"
    details: ClassVar[tuple[str, ...]] = ("field",)
    field: str = ""


class BadFile(ValidationError):
    """An import file is not what it says: a line too long, not UTF-8, not JSON, cut short.

    ``line`` is the 1-based number of the offending line (0: the file as a
    whole, such as a missing end record); nothing of the file was stored
    (docs/commands.md, "Files").
    """

    code = "bad_file"
    default_message = "not a valid session file"
    details: ClassVar[tuple[str, ...]] = ("field", "line")
    line: int = 0


class TooLarge(AgentStoreError):
    """The answer asked for is bigger than a surface builds in one go; ask for pages.

    ``limit`` is the bound that was hit; the message says how to page (the API
    answers 400 ``too_large``, docs/api.md "Bounded answers").
    """

    code = "too_large"
    default_message = "the answer is too large; read it in pages"
    details = ("limit",)
    limit: int = 0


# -- sessions, entries and holds ---------------------------------------------


class NoSession(AgentStoreError, LookupError):
    """The session does not exist (or a ref names a session that is gone)."""

    code = "no_session"
    default_message = "no such session"
    status = 404
    details = ("target",)
    #: For a dangling ref: the ``RefTarget`` the ref still names.
    target: Any = None


class WrongSessionKind(AgentStoreError):
    """The request names a session of another kind (a step for a tree session, …).

    The API answers it as 409 ``wrong_session_kind`` (docs/api.md "One error
    shape"); ``kind`` is the session's kind, ``expected`` what the request needs.
    """

    code = "wrong_session_kind"
    default_message = "the session is of another kind"
    status = 409
    details = ("session_id", "kind", "expected")
    session_id: str = ""
    kind: str = ""
    expected: str = ""

    def __init__(self, message: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        if not message:  # the default names the session and both kinds
            self.message = (
                f"session {self.session_id!r} is a {self.kind} session; "
                f"this needs a {self.expected} session"
            )
            self.args = (self.message,)


class SessionExists(AgentStoreError):
    """A session with that id already exists."""

    code = "session_exists"
    default_message = "session already exists"
    status = 409


class SessionLocked(AgentStoreError):
    """The session is held by another store (another process), or our hold was lost."""

    code = "session_locked"
    default_message = "session is open in another process"
    status = 423


class SessionBusy(AgentStoreError):
    """A run was started with ``if_busy="reject"`` on a session another run is going on."""

    code = "session_busy"
    default_message = "a run is going on on this session"
    status = 409


class ConcurrentWriter(AgentStoreError):
    """Another writer appended to the session since this store loaded it."""

    code = "concurrent_writer"
    default_message = "another process appended to the session"
    status = 409


class ReadOnly(AgentStoreError):
    """A write was attempted through a read-only store."""

    code = "read_only"
    default_message = "store is read-only"
    status = 409


class NoEntry(AgentStoreError, LookupError):
    """The entry does not exist in the session."""

    code = "no_entry"
    default_message = "no such entry"
    status = 404


class BaseRule(NoEntry):
    """An append to a fork would hang from above its base (also a :class:`NoEntry`)."""

    code = "base_rule"
    default_message = "entry would hang above the session's base"
    status = 409


class BadID(AgentStoreError):
    """An entry's id does not match its content (corruption or a forged id)."""

    code = "bad_id"
    default_message = "entry id does not match its content"


class HashMismatch(BadID):
    """A stored hash (content hash or request hash) does not verify."""

    code = "hash_mismatch"
    default_message = "hash mismatch"


class NoHash(ValidationError):
    """A ``response`` asked to verify recorded no ``request_hash`` (``field`` names the entry)."""

    code = "no_hash"
    default_message = "the response recorded no request hash"


class UnresolvedMigration(ValidationError):
    """A migrated pre-0.5 session holds an entry whose references could not be rewritten.

    It reads, but writing it as a current file (``dumps``, an import, a fork's
    prefix) would keep an old short id where the format puts a hash.
    """

    code = "unresolved_migration"
    default_message = "migrated session holds entries that could not be rewritten"


class BadConvergence(AgentStoreError):
    """A ``parents`` convergence reference breaks the format's rules."""

    code = "bad_convergence"
    default_message = "bad convergence reference"


class ReservedMember(ValidationError):
    """An entry body carries an envelope member (``id``, ``parent``, ``ts`` …)."""

    code = "reserved_member"
    default_message = "entry body uses a reserved member"


class Superseded(AgentStoreError):
    """The session was continued in another session."""

    code = "superseded"
    default_message = "session was continued in another session"
    status = 409


class StaleCompactionParent(AgentStoreError):
    """Another compactor already compacted this (session, parent); carries the winner."""

    code = "stale_compaction_parent"
    default_message = "stale compaction parent"
    status = 409
    details = ("winner_entry_id",)
    winner_entry_id: str = ""


class CompactionConflict(AgentStoreError):
    """A compaction operation id is already used for another target."""

    code = "compaction_operation_mismatch"
    default_message = "compaction operation id targets another branch"
    status = 409


# -- tool-call lifecycle rules of the agentsession format --------------------


class CallRuleError(AgentStoreError):
    """Base class of the function-call lifecycle rules.

    See docs/agentsession-format.md, "Rules enforced on append".
    """

    code = "call_rule"
    status = 409


class CallIDEmpty(CallRuleError):
    code = "call_id_empty"
    default_message = "function_call has an empty call_id"
    status = 400  # bad input, not a conflict with the session's calls


class CallIDRepeated(CallRuleError):
    code = "call_id_repeated"
    default_message = "call_id is already used in this session"


class BadTarget(CallRuleError):
    code = "bad_target"
    default_message = "decision or dispatch does not target a function_call on the path"


class CallRejected(CallRuleError):
    code = "call_rejected"
    default_message = "the call was rejected"


class CallAnswered(CallRuleError):
    code = "call_answered"
    default_message = "the call was answered"


class RejectDispatched(CallRuleError):
    code = "reject_dispatched"
    default_message = "a dispatched call cannot be rejected"


class CallCompleted(CallRuleError):
    code = "call_completed"
    default_message = "the call already has its output"


class AnswerNotDispatched(CallRuleError):
    code = "answer_not_dispatched"
    default_message = "an answer needs a dispatched call"


# -- refs --------------------------------------------------------------------


class NoRef(AgentStoreError, LookupError):
    """No ref has that name."""

    code = "no_ref"
    default_message = "no such ref"
    status = 404


class NoRefs(AgentStoreError):
    """The store does not keep refs."""

    code = "no_refs"
    default_message = "store does not keep refs"
    status = 409


class RefMoved(AgentStoreError):
    """Compare-and-swap failed: the ref no longer names the expected target."""

    code = "ref_moved"
    default_message = "ref moved"
    status = 409
    details = ("name", "current")
    name: str = ""
    #: The ``RefTarget`` the ref names now (``None`` when absent).
    current: Any = None


class RefNameError(ValidationError):
    """The ref name (or prefix) breaks the naming rules or conflicts with another ref."""

    code = "ref_name"
    default_message = "invalid ref name"
    details = ("field", "conflicts_with")
    #: The existing ref whose name forbids this one (creation conflicts), or "".
    conflicts_with: str = ""


# -- documents ---------------------------------------------------------------


class NoDocument(AgentStoreError, LookupError):
    """No document has that (namespace, key)."""

    code = "no_document"
    default_message = "no such document"
    status = 404


# -- tasks -------------------------------------------------------------------


class NoTask(AgentStoreError, LookupError):
    """No task (you may see) has that id."""

    code = "no_task"
    default_message = "no such task"
    status = 404


class NoToolTask(NoTask):
    """No tool task (you may see) has that id."""

    code = "no_tool_task"
    default_message = "no such tool task"


class NoAgentTask(NoTask):
    """No agent task (you may see) has that id."""

    code = "no_agent_task"
    default_message = "no such agent task"


class NoWorkflow(NoTask):
    """No workflow run (you may see) has that id."""

    code = "no_workflow"
    default_message = "no such workflow"


class NoRun(NoTask):
    """No run (you may see) has that id."""

    code = "no_run"
    default_message = "no such run"


class TaskConflict(AgentStoreError):
    """A task operation conflicts with the task's current state or lease."""

    code = "task_conflict"
    default_message = "task conflict"
    status = 409


class RepositoryGraphMismatch(AgentStoreError, ValueError):
    """Composite task repositories were given dependencies that do not share one task repository."""

    code = "repository_graph_mismatch"
    default_message = "task repositories must share one task repository and database"


class TaskCrashed(AgentStoreError):
    """A run of the task ended because its worker went away (the lease expired).

    Never raised: it names the error that ``django.tasks``' ``TaskResult.errors``
    lists for such a run (``exception_class_path``), so a result shows each
    crash beside the task's own exceptions. ``crashes`` counts the task's
    crashes so far, ``max_crashes`` is the budget (``TASK_MAX_CRASHES``) it ran
    under (docs/tasks.md, "Retries and recovery").
    """

    code = "crashed"
    default_message = "the worker running the task went away (its lease expired)"
    status = 409
    details = ("crashes", "max_crashes")
    crashes: int = 0
    max_crashes: int = 0


class InvalidTaskArguments(ValidationError, TypeError):
    """A ``django.tasks`` call's arguments are not JSON that reads back unchanged.

    Raised by ``AgentStoreBackend.enqueue`` before anything is written: bytes,
    tuples, sets, non-string keys, NaN/Infinity, NUL or lone surrogates in text,
    nesting past ``JSON_MAX_DEPTH``, or more than ``DATA_UPLOAD_MAX_MEMORY_SIZE``
    bytes of JSON. A ``ValueError`` and a ``TypeError``, as the framework's own
    argument errors are one or the other (docs/tasks.md, "Django's task framework").
    """

    code = "invalid_task_arguments"
    default_message = "task arguments must be JSON that reads back unchanged"


class WorkflowInvocationConflict(AgentStoreError):
    """The (workflow, node key, invocation index) is already linked to another agent task."""

    code = "workflow_agent_invocation_conflict"
    default_message = "workflow invocation is already linked to another agent task"
    status = 409


class AgentTaskAlreadyLinked(AgentStoreError):
    """The agent task is linked to a workflow invocation already (an agent task has one link)."""

    code = "agent_task_already_linked"
    default_message = "the agent task is already linked to a workflow invocation"
    status = 409


# -- the database ------------------------------------------------------------


class DatabaseBusy(AgentStoreError, OperationalError):
    """A write transaction kept meeting a busy SQLite database and gave up.

    It is still an :class:`django.db.utils.OperationalError`, so code that
    already handles "database is locked" keeps working.
    """

    code = "database_busy"
    default_message = "database is busy"
    status = 503
    details = ("attempts",)
    attempts: int = 0


class StorageConflict(AgentStoreError, IntegrityError):
    """The database refused a write as conflicting with its rows (a constraint failed).

    Raised where an integration's write meets a constraint the store did not
    expect to fail — rows changed by another process in between, or written
    around the stores. Still an :class:`django.db.utils.IntegrityError`, so code
    that already handles one keeps working; the database's message is in
    ``cause``.
    """

    code = "storage_conflict"
    default_message = "the database refused the write: it conflicts with stored rows"
    status = 409
    details = ("cause",)
    cause: str = ""


class DatabaseUnavailable(AgentStoreError, OperationalError):
    """The database failed a statement for a reason other than being busy.

    Unreachable, not migrated (a missing table), out of space, a broken
    connection: what retrying the same call may or may not cure, unlike bad
    input. A busy SQLite database that outlasted the retries is
    :class:`DatabaseBusy`. Still an :class:`django.db.utils.OperationalError`;
    the database's message is in ``cause``.
    """

    code = "database_unavailable"
    default_message = "the database failed the operation"
    status = 503
    details = ("cause",)
    cause: str = ""

"""The agent-loop store: step traces, session snapshots and durable approvals.

A re-implementation of agentloop's ``agentloopsql`` store (``SessionStore`` +
``StepStore`` + grants) over agentstore's schema: steps live in the
insertion-ordered ``Step`` table, the session columns on the shared ``Session``
(``kind="loop"``), approvals in ``Grant``::

    from agentstore.stores import LoopStore
    from agentstore.types import RunStep

    store = LoopStore()
    store.append(RunStep(session_id="s1", step_index=0, step_type="user", content="hi"))
    history = store.last_n("s1", 50)            # the last 50 steps, oldest first

Rules that matter (docs/loop-store.md, "Where things are stored"):

* Order is insertion order (``Step.id``), never ``step_index``, which repeats by
  design. :meth:`LoopStore.last_n` takes the newest *n* and returns them oldest
  first, because the loop replays them straight into the model's context.
* :meth:`LoopStore.get` never creates and never fails: an unknown id gives
  ``LoopSession()`` (``id == ""``).
* :meth:`LoopStore.finalize` upserts and never touches ``data``; the last run wins.
* :meth:`LoopStore.delete` purges steps and grants even when the session row is
  missing — a stale grant must never pre-approve a later session reusing the id —
  and still raises :class:`~agentstore.exceptions.NoSession` then.

The loop store owns only ``kind="loop"`` sessions. An id that belongs to a tree or
log session is invisible to its reads, and its writes raise
:class:`~agentstore.exceptions.WrongSessionKind` rather than mixing a step trace
into (or deleting) another store's session.

Hot paths. :meth:`append` and :meth:`last_n` run once per loop step, so they send
hand-written, parameterised SQL (:mod:`agentstore.sql.steps`) instead of the ORM,
which costs several times the work per row, on :mod:`agentstore.db`'s cursor: the
append is one body for :func:`agentstore.db.write` (the session touched by one
narrow ``UPDATE`` once it exists), and ``last_n`` builds its ``RunStep`` values
with a positional builder (:mod:`agentstore.types.frozen`). Datetimes are adapted
as Django adapts them, so rows written here and rows written by the ORM read back
the same. Everything else uses the ORM.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connections
from django.db.models import F, OrderBy, OuterRef, Subquery
from django.db.models.functions import Collate

from agentstore import db, sql
from agentstore.db import SqlCursor, read_snapshot
from agentstore.db.thread import async_twin
from agentstore.exceptions import NoSession, ValidationError
from agentstore.models import Grant, Session, Step
from agentstore.models.sessions import SessionKind
from agentstore.sql import steps as steps_sql
from agentstore.stores.base import Clock, StoreBase, false, lookup, nothing
from agentstore.stores.sessions import RowWriter, SessionStore, wrong_kind
from agentstore.types.frozen import positional_builder, require_fields
from agentstore.types.loop import (
    FinalizeSummary,
    GrantInfo,
    LoopSession,
    RunStep,
    SessionInfo,
    TokenUsage,
)
from agentstore.types.sessions import SessionRow
from agentstore.validation import require_aware, require_int, require_json, require_name

__all__ = ["EXPORT_PAGE", "LoopStore", "prompt_digest"]

#: Steps (and grants) an export reads per query: its memory, whatever the session's length.
EXPORT_PAGE = 500

LOOP = SessionKind.LOOP.value

#: Largest value of a 32-bit ``IntegerField`` (``Step.step_index``).
INT32_MAX = 2**31 - 1
#: Largest value of a ``BigIntegerField`` (token counts, durations, sizes).
INT64_MAX = 2**63 - 1

# A Step row's values in column order, as _clean_step returns them: every
# column but created_at, which is last and is adapted for the backend separately.
_STEP_COLUMNS = sql.column_names(Step)
if _STEP_COLUMNS[-1] != "created_at":  # pragma: no cover - a model change
    raise ImportError("Step.created_at must be the last Step column (LoopStore.append)")
_STEP_ORDER = (
    "session_id",
    "step_index",
    "step_type",
    "content",
    "tool_args",
    "duration_ms",
    "prompt_tokens",
    "completion_tokens",
)
if tuple(_STEP_COLUMNS[:-1]) != _STEP_ORDER:  # pragma: no cover - a model change
    raise ImportError(f"Step columns are {_STEP_COLUMNS}: update _clean_step (LoopStore.append)")

_SUMMARY_FIELDS = (
    "status",
    "prompt_tokens",
    "completion_tokens",
    "step_count",
    "duration_ms",
    "data_bytes_carried",
)


def prompt_digest(prompt: str) -> str:
    """Return the SHA-256 hex digest a grant of ``prompt`` is keyed by."""
    return hashlib.sha256(prompt.encode()).hexdigest()


class LoopStore(StoreBase):
    """Durable step traces, session snapshots and approvals for agent loops."""

    def __init__(self, *, using: str = "default", clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        #: The owner of the session rows (this store keeps steps and grants).
        self.sessions = SessionStore(using=using, clock=clock)

    # -- StepStore ---------------------------------------------------------

    def append(self, step: RunStep) -> None:
        """Record ``step``, creating its session row if this is the session's first write.

        The session row is upserted (``updated_at`` = the store's clock) and the
        step inserted in one write transaction, so a session is never listed
        without its steps or the other way round. ``step.created_at`` ``None``
        stamps the step with the store's clock.
        """
        row, created_at = _clean_step(step)
        # Both stamps are taken before the transaction: the write may re-run
        # the function on SQLITE_BUSY and must write the same values each time.
        if created_at is None:
            created_at = self.now()
        stamp = self.now()
        connection = connections[self.using]
        step_params = (*row, sql.adapt_datetime(connection, created_at))
        # Adapted here, outside the write lock.
        adapted = sql.adapt_datetime(connection, stamp)
        sid = row[0]
        sessions = self.sessions

        def append(cursor: SqlCursor) -> None:
            sessions.touch_or_create(cursor, LOOP, sid, stamp=stamp, adapted=adapted)
            cursor.execute(steps_sql.INSERT, step_params)

        db.write(append, using=self.using, connection=connection)

    @lookup("session_id", missing=nothing)
    def last_n(self, session_id: str, n: int) -> builtins.list[RunStep]:
        """Return the session's most recent ``n`` steps, oldest first (``n <= 0``: all of them).

        An unknown session has no steps: the answer is ``[]``.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise ValidationError("n must be an integer", field="n")
        connection = connections[self.using]
        statements = steps_sql.reads(connection.vendor)
        # One SELECT is its own consistent snapshot (autocommit), so no read
        # transaction is opened around it: the hot path stays one round trip.
        params: tuple[Any, ...]
        if n > 0:
            statement, params = statements.last_n, (session_id, min(n, INT64_MAX))
        else:
            statement, params = statements.all_steps, (session_id,)
        with db.cursor_on(connection) as cursor:
            cursor.execute(statement, params)
            rows = cursor.fetchall()
        if n > 0:
            rows.reverse()
        return _run_steps(session_id, rows, text_stamps=connection.vendor == "sqlite")

    def steps(self, session_id: str) -> builtins.list[RunStep]:
        """Return every step of the session in insertion order."""
        return self.last_n(session_id, 0)

    # -- SessionStore ------------------------------------------------------

    @lookup("session_id", missing=lambda arguments: LoopSession())
    def get(self, session_id: str) -> LoopSession:
        """Return the session's snapshot; ``LoopSession()`` (id ``""``) if unknown; never create."""
        row = (
            Session.objects.using(self.using)
            .filter(pk=session_id, kind=LOOP)
            .values_list("id", "model", "system_prompt", "data", "message_id")
            .first()
        )
        if row is None:
            return LoopSession()
        sid, model, system_prompt, data, message_id = row
        return LoopSession(
            id=sid,
            model=model,
            system_prompt=system_prompt,
            data=None if data is None else bytes(data),
            message_id=message_id,
        )

    def exists(self, session_id: str) -> bool:
        """Tell whether a loop session with this id is stored. Never creates."""
        return self.sessions.kind_of(session_id) == LOOP

    def update_data(self, session_id: str, snapshot: bytes | None) -> None:
        """Replace the session's working-memory snapshot, creating the session on first write.

        ``snapshot`` must be JSON text as bytes, kept byte for byte; ``None``
        stores NULL.
        """
        sid = _clean_session_id(session_id, "session_id")
        data = _clean_json_bytes(snapshot, "snapshot")
        stamp = self.now()
        upsert = self.sessions.prepare_upsert(LOOP, sid, stamp=stamp, data=data)
        self.write(lambda cursor: self.sessions.upsert(cursor, upsert))

    def finalize(self, session_id: str, summary: FinalizeSummary) -> None:
        """Record the summary of the run that just ended (the last run wins), creating the session.

        The snapshot (``data``) and ``created_at`` are never touched.
        """
        sid = _clean_session_id(session_id, "session_id")
        values = _clean_summary(summary)
        stamp = self.now()
        upsert = self.sessions.prepare_upsert(LOOP, sid, stamp=stamp, **values)
        self.write(lambda cursor: self.sessions.upsert(cursor, upsert))

    # -- listing and housekeeping -----------------------------------------

    def list(self, limit: int = 0) -> builtins.list[SessionInfo]:
        """Return loop sessions most recently updated first (``limit <= 0``: no cap)."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValidationError("limit must be an integer", field="limit")
        opening = (
            Step.objects.using(self.using)
            .filter(session_id=OuterRef("pk"), step_type="user")
            .order_by("id")
            .values("content")[:1]
        )
        rows = (
            Session.objects.using(self.using)
            .of_kind(LOOP)
            .annotate(opening=Subquery(opening))
            .order_by(*self._newest_first())
            .values_list(
                "id",
                "model",
                "status",
                "step_count",
                "prompt_tokens",
                "completion_tokens",
                "created_at",
                "updated_at",
                "opening",
            )
        )
        if limit > 0:
            rows = rows[:limit]
        return [
            SessionInfo(
                id=sid,
                model=model,
                status=status,
                steps=steps,
                tokens=TokenUsage(prompt=prompt, completion=completion),
                created_at=created_at,
                updated_at=updated_at,
                opening=opening_text or "",
            )
            for (
                sid,
                model,
                status,
                steps,
                prompt,
                completion,
                created_at,
                updated_at,
                opening_text,
            ) in rows
        ]

    def most_recent(self) -> str:
        """Return the id of the most recently updated loop session (``NoSession`` if none)."""
        sid = (
            Session.objects.using(self.using)
            .of_kind(LOOP)
            .order_by(*self._newest_first())
            .values_list("id", flat=True)
            .first()
        )
        if sid is None:
            raise NoSession("no loop sessions stored")
        return sid

    def delete(self, session_id: str) -> None:
        """Delete the session, its steps and its grants.

        As every store's delete: ``NoSession`` when there is no session row,
        ``WrongSessionKind`` (nothing of it deleted) when the id is a tree or log
        session's. Grants stored under the id are purged in both cases, so a
        stale grant never pre-approves a later session that reuses the id.
        """
        sid = _clean_session_id(session_id, "session_id")

        def write(cursor: SqlCursor) -> str | None:
            kind = self.sessions.lock_kind(cursor, sid)
            if kind == LOOP:
                self.sessions.delete_rows(cursor, sid, LOOP)  # grants go too
            else:
                Grant.objects.using(self.using).filter(session_id=sid).delete()
            return kind

        kind = self.write(write, orm=True)
        if kind is None:
            raise NoSession(f"no such session: {sid}")
        if kind != LOOP:
            raise wrong_kind(sid, LOOP, (kind,))

    # -- export and import (docs/commands.md, "Files") ------------------------

    def export_rows(
        self, session_id: str, *, page: int = EXPORT_PAGE
    ) -> Iterator[SessionRow | RunStep | GrantInfo]:
        """The session's row, then its steps in insertion order, then its grants.

        Read ``page`` rows per query (keyset pages on the insertion id) inside
        one read snapshot, so a 100,000-step session is never in memory at once
        and a concurrent append is either wholly in the export or not at all.
        ``NoSession`` (at the first ``next``) when there is no loop session.
        Close the iterator (``contextlib.closing``) if you stop early: it holds
        the snapshot until then.
        """
        with read_snapshot(self.using):
            row = self.sessions.export_row(session_id)
            if row is None or row.kind != LOOP:
                raise NoSession(f"no such loop session: {session_id}")
            yield row
            steps = Step.objects.using(self.using).filter(session_id=session_id)
            after = 0
            while True:
                rows = builtins.list(
                    steps.filter(id__gt=after)
                    .order_by("id")
                    .values_list("id", *_STEP_ORDER[1:], "created_at")[:page]
                )
                for _, index, kind, text, args, ms, prompt, completion, at in rows:
                    yield RunStep(
                        session_id=session_id,
                        step_index=index,
                        step_type=kind,
                        content=text,
                        tool_args=None if args is None else bytes(args),
                        duration_ms=ms,
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                        created_at=sql.utc(at),
                    )
                if len(rows) < page:
                    break
                after = rows[-1][0]
            grants = Grant.objects.using(self.using).filter(session_id=session_id)
            after = 0
            while True:
                found = builtins.list(
                    grants.filter(id__gt=after)
                    .order_by("id")
                    .values_list("id", "prompt", "granted_at")[:page]
                )
                for _, prompt, granted_at in found:
                    yield GrantInfo(
                        session_id=session_id, prompt=prompt, granted_at=sql.utc(granted_at)
                    )
                if len(found) < page:
                    break
                after = found[-1][0]

    def import_session(
        self,
        session: SessionRow,
        rows: Iterable[RunStep | GrantInfo],
        *,
        owner: Any = None,
    ) -> dict[str, int]:
        """Store a loop session moved from another database: its row, steps and grants as given.

        Every value is kept — step stamps, ``tool_args`` and ``data`` bytes,
        the summary columns, ``created_at``/``updated_at`` — and steps keep
        their order. ``rows`` is consumed as it comes and written in batches
        (:meth:`SessionStore.import_rows`), all in one transaction: a bad row
        anywhere stores nothing. Each step and grant is validated as
        :meth:`append` and :meth:`grant` validate theirs, and must carry the
        session's id and its own timestamp. Returns ``{"step": n, "grant": m}``.
        ``SessionExists`` when the id is taken; ``ValidationError`` when a
        grant repeats a prompt (in the rows, or left under the id before).
        """
        sid = session.id if isinstance(session, SessionRow) else ""
        if isinstance(session, SessionRow) and session.kind != LOOP:
            raise ValidationError("session.kind must be loop", field="session.kind")

        def step_params(step: RunStep, connection: Any) -> Sequence[Any]:
            row, created_at = _clean_step(step)
            if row[0] != sid:
                raise ValidationError(
                    f"step.session_id {row[0]!r} is not the session's id {sid!r}",
                    field="step.session_id",
                )
            if created_at is None:
                raise ValidationError("step.created_at is required", field="step.created_at")
            return (*row, sql.adapt_datetime(connection, created_at))

        def grant_params(grant: GrantInfo, connection: Any) -> Sequence[Any]:
            if grant.session_id != sid:
                raise ValidationError(
                    f"grant.session_id {grant.session_id!r} is not the session's id {sid!r}",
                    field="grant.session_id",
                )
            text = _clean_prompt(grant.prompt)
            granted_at = grant.granted_at
            if not isinstance(granted_at, datetime):
                raise ValidationError("grant.granted_at is required", field="grant.granted_at")
            return sql.row(
                Grant,
                session_id=sid,
                prompt=text,
                prompt_digest=prompt_digest(text),
                granted_at=sql.adapt_datetime(
                    connection, require_aware(granted_at, "grant.granted_at")
                ),
            )

        return self.sessions.import_rows(
            session,
            rows,
            {
                RunStep: RowWriter("step", steps_sql.INSERT, step_params),
                GrantInfo: RowWriter("grant", steps_sql.IMPORT_GRANT, grant_params),
            },
            owner=owner,
        )

    # -- approvals ----------------------------------------------------------

    def grant(self, session_id: str, prompt: str) -> None:
        """Remember that the user approved ``prompt`` in this session (refreshes ``granted_at``).

        Only approvals are stored; a refusal is never remembered. No session row
        is needed or created.
        """
        self.grant_created(session_id, prompt)

    def grant_created(self, session_id: str, prompt: str) -> tuple[GrantInfo, bool]:
        """:meth:`grant`, returning the stored grant and whether this call created it.

        ``False`` means the prompt was approved already (a replay): its
        ``granted_at`` is refreshed, as :meth:`grant` does. Decided inside the
        write transaction by the INSERT's row count (``ON CONFLICT DO NOTHING``),
        so two racing first approvals cannot both be told "created" — the API's
        201 vs 200 (docs/api.md, "Replays").
        """
        sid = _clean_session_id(session_id, "session_id")
        text = _clean_prompt(prompt)
        digest = prompt_digest(text)
        # Taken before the transaction: the driver may re-run the body on SQLITE_BUSY.
        stamp = self.now()
        connection = connections[self.using]
        params = sql.row(
            Grant,
            session_id=sid,
            prompt=text,
            prompt_digest=digest,
            granted_at=connection.ops.adapt_datetimefield_value(stamp),
        )

        refresh = [params[-1], sid, digest]

        def write(cursor: SqlCursor) -> bool:
            cursor.execute(steps_sql.INSERT_GRANT, params)
            if cursor.rowcount == 1:
                return True
            cursor.execute(steps_sql.REFRESH_GRANT, refresh)
            return False

        created = self.write(write)
        return GrantInfo(session_id=sid, prompt=text, granted_at=stamp), created

    @lookup("session_id", "prompt", missing=false)
    def is_granted(self, session_id: str, prompt: str) -> bool:
        """Tell whether exactly this ``prompt`` was approved in this session."""
        if not isinstance(prompt, str):
            raise ValidationError("prompt must be a string", field="prompt")
        # The digest finds the row through the unique index; the text comparison
        # makes the answer exact regardless of the hash.
        return (
            Grant.objects.using(self.using)
            .filter(session_id=session_id, prompt_digest=prompt_digest(prompt), prompt=prompt)
            .exists()
        )

    @lookup("session_id", missing=nothing)
    def grants(self, session_id: str) -> builtins.list[str]:
        """Return the session's approved prompts, oldest grant first (ties by prompt)."""
        rows = Grant.objects.using(self.using).filter(session_id=session_id)
        pairs = list(rows.values_list("granted_at", "prompt"))
        # Sorted here rather than by the database: the tie-break on the prompt
        # must be code-point order on every backend, whatever its collation.
        pairs.sort()
        return [prompt for _, prompt in pairs]

    def revoke(self, session_id: str) -> int:
        """Forget every approval of the session and return how many there were (0 is fine)."""
        sid = _clean_session_id(session_id, "session_id")

        def write(cursor: SqlCursor) -> int:
            count, _ = Grant.objects.using(self.using).filter(session_id=sid).delete()
            return count

        return self.write(write, orm=True)

    # -- async twins ----------------------------------------------------------
    # Each the same body, run once off the event loop (agentstore.db.thread).

    aappend = async_twin(append)
    alast_n = async_twin(last_n)
    asteps = async_twin(steps)
    aget = async_twin(get)
    aexists = async_twin(exists)
    aupdate_data = async_twin(update_data)
    afinalize = async_twin(finalize)
    alist = async_twin(list)
    amost_recent = async_twin(most_recent)
    adelete = async_twin(delete)
    agrant = async_twin(grant)
    agrant_created = async_twin(grant_created)
    ais_granted = async_twin(is_granted)
    agrants = async_twin(grants)
    arevoke = async_twin(revoke)

    # -- internals ------------------------------------------------------------

    def _newest_first(self) -> builtins.list[OrderBy]:
        # The id tie-break compares code points on both backends (SQLite's BINARY
        # collation; "C" on PostgreSQL, whose default collation may be a locale's).
        sid: Any = F("id")
        if connections[self.using].vendor == "postgresql":
            sid = Collate("id", "C")
        return [F("updated_at").desc(), sid.desc()]


# -- building RunSteps from rows ------------------------------------------------------

# RunStep is a frozen, slotted dataclass: its generated __init__ sets each field
# through object.__setattr__ and costs about three times what the read's rows
# cost to fetch. A step read back is built by a positional builder instead
# (agentstore.types.frozen, decision record 0035) — the same object, field for field
# (tests/stores/test_loop_lean.py compares).
_RUN_STEP_FIELDS = (*_STEP_ORDER, "created_at")
require_fields(RunStep, _RUN_STEP_FIELDS)
_new_step = positional_builder(RunStep)


def _run_steps(
    session_id: str, rows: Sequence[Sequence[Any]], *, text_stamps: bool
) -> builtins.list[RunStep]:
    """``RunStep`` values of the session's step rows (``steps_sql.reads`` columns).

    ``text_stamps``: ``created_at`` comes as SQLite's text (naive UTC), parsed
    here directly; anything else goes through :func:`agentstore.sql.utc`.
    """
    new_step = _new_step
    if text_stamps:
        parse = datetime.fromisoformat
        try:
            # Django's text form (YYYY-MM-DD HH:MM:SS[.ffffff]), naive UTC, parsed
            # directly; one comprehension (a loop of appends costs ~10% more).
            return [
                new_step(
                    session_id,
                    index,
                    kind,
                    text,
                    # sqlite3 gives bytes (or None): no copy to make.
                    args if args is None or type(args) is bytes else bytes(args),
                    ms,
                    prompt,
                    completion,
                    parse(at + "+00:00"),
                )
                for index, kind, text, args, ms, prompt, completion, at in rows
            ]
        except (TypeError, ValueError):
            pass  # a stamp in another form: the general path below
    # Positional, in _RUN_STEP_FIELDS order.
    return [
        new_step(
            session_id,
            index,
            kind,
            text,
            None if args is None else bytes(args),
            ms,
            prompt,
            completion,
            sql.utc(at),
        )
        for index, kind, text, args, ms, prompt, completion, at in rows
    ]


# -- validating input -------------------------------------------------------------


def _clean_session_id(value: Any, field: str) -> str:
    # The one rule for ids (decision record 0079).
    return require_name(value, field)


def _clean_text(value: Any, field: str, *, max_length: int | None = None) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string", field=field)
    if max_length is not None and len(value) > max_length:
        raise ValidationError(f"{field} is longer than {max_length} characters", field=field)
    # PostgreSQL text cannot hold NUL; refusing it everywhere keeps both
    # backends storing the same things.
    if "\x00" in value:
        raise ValidationError(f"{field} must not contain NUL characters", field=field)
    return value


def _clean_count(value: Any, field: str, maximum: int = INT64_MAX) -> int:
    return require_int(value, field, 0, maximum)


def _clean_json_bytes(value: Any, field: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ValidationError(f"{field} must be bytes (JSON text) or None", field=field)
    data = bytes(value)
    if not data:
        # Go's zero json.RawMessage is empty: "no value", stored as NULL.
        return None
    require_json(data, field)
    return data


def _clean_prompt(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("prompt is required", field="prompt")
    return _clean_text(value, "prompt")


def _clean_step(step: Any) -> tuple[tuple[Any, ...], datetime | None]:
    """A valid step's columns but ``created_at`` (``_STEP_COLUMNS`` order), and ``created_at``.

    A tuple rather than a cleaned ``RunStep``: this runs once per loop step, and
    the parameters are all the append needs (decision record 0028).
    """
    if not isinstance(step, RunStep):
        raise ValidationError("step must be a RunStep", field="step")
    created_at = step.created_at
    if created_at is not None:
        if not isinstance(created_at, datetime):
            raise ValidationError("step.created_at must be a datetime", field="step.created_at")
        if created_at.tzinfo is None or created_at.utcoffset() is None:
            raise ValidationError("step.created_at must be timezone-aware", field="step.created_at")
        created_at = created_at.astimezone(UTC)
    step_type = step.step_type
    if not isinstance(step_type, str) or not step_type:
        raise ValidationError("step.step_type is required", field="step.step_type")
    index, duration, prompt, completion = (
        step.step_index,
        step.duration_ms,
        step.prompt_tokens,
        step.completion_tokens,
    )
    # Plain ints in range (the common case) pass in one test; anything else
    # (bool, an int subclass, out of range) takes _clean_count's exact rules.
    if not (
        type(index) is int
        and type(duration) is int
        and type(prompt) is int
        and type(completion) is int
        and 0 <= index <= INT32_MAX
        and 0 <= duration <= INT64_MAX
        and 0 <= prompt <= INT64_MAX
        and 0 <= completion <= INT64_MAX
    ):
        index = _clean_count(index, "step.step_index", INT32_MAX)
        duration = _clean_count(duration, "step.duration_ms")
        prompt = _clean_count(prompt, "step.prompt_tokens")
        completion = _clean_count(completion, "step.completion_tokens")
    row = (
        _clean_session_id(step.session_id, "step.session_id"),
        index,
        _clean_text(step_type, "step.step_type", max_length=64),
        _clean_text(step.content, "step.content"),
        _clean_json_bytes(step.tool_args, "step.tool_args"),
        duration,
        prompt,
        completion,
    )
    return row, created_at


def _clean_summary(summary: Any) -> dict[str, Any]:
    if not isinstance(summary, FinalizeSummary):
        raise ValidationError("summary must be a FinalizeSummary", field="summary")
    values: dict[str, Any] = {
        "status": _clean_text(summary.status, "summary.status", max_length=64)
    }
    for name in _SUMMARY_FIELDS[1:]:
        values[name] = _clean_count(getattr(summary, name), f"summary.{name}")
    return values

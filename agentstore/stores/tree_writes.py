"""Writing a tree session: the appends, a whole session imported, a branch deleted.

:class:`TreeWrites` is the write half of :class:`agentstore.stores.tree.TreeStore`
(a base class of it; nothing else should build one)::

    user = store.append_message(session.id, None, MessageEntity(role="user", content="hi"))
    store.append_label_change(session.id, user.id, user.id, "start")
    store.append_compaction(AppendCompactionInput(session_id=..., operation_id="op-1", ...))

Every append_* method shapes its entry's data object and hands it to one
pipeline, in two steps:

1. :meth:`TreeWrites._prepare`, outside any transaction: validate, read the
   clock, derive the metadata columns (:mod:`agentstore.stores.tree_metadata`)
   and encode the data JSON — a :class:`Draft`, so a retried transaction
   writes the very same values;
2. :meth:`TreeWrites._write_draft`: one short write transaction that touches the
   session row (on PostgreSQL that row lock serialises appends to one session;
   on SQLite the writer queue does), checks the parent and inserts the entry
   at the next ``seq`` with its message parts. A plain append (any kind but a
   compaction) is one body of two hand-written statements for
   :func:`agentstore.db.write`, which on SQLite opens the transaction on the
   ``sqlite3`` connection itself.

The ``EntryEntity`` an append returns is built once, after the INSERT told its
``seq`` (:meth:`Draft.entry`): a frozen value object is never changed after it
was built. A ``None`` parent makes a new root: the store never guesses "the
current leaf" for you.

A compaction takes the general path: it may be a replay of its operation id
(then it writes nothing and returns the stored entry) or lose a race for its
parent (``StaleCompactionParent``), and it records the settings in force at
its parent (:func:`agentstore.stores.tree_walks.settings_at`) so a context
build never climbs above it (docs/tree-store.md, "Compactions").
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction

from agentstore import db, exceptions, sql
from agentstore.db import SqlCursor, is_unique_violation
from agentstore.ids import new_id
from agentstore.models import Entry
from agentstore.sql import tree as tree_sql
from agentstore.stores.base import StoreBase, lookup, no_session, none
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree_context import NO_SETTINGS, Settings, apply_settings
from agentstore.stores.tree_metadata import derive_metadata
from agentstore.stores.tree_parts import validate_message
from agentstore.stores.tree_rows import (
    TREE,
    encode_data,
    encode_settings,
    new_entry,
    new_message,
    part_rows,
    select_entries,
)
from agentstore.stores.tree_walks import settings_at
from agentstore.types.tree import (
    AppendCompactionInput,
    EntryEntity,
    EntryTokenUsageEntity,
    ImportedSession,
    MessageEntity,
    MessagePartEntity,
    SessionEntity,
)
from agentstore.validation import (
    require_aware,
    require_json,
    require_max_length,
    require_name,
    require_storable_text,
    require_text,
)

__all__ = ["Draft", "TreeWrites"]

_CHUNK = tree_sql.CHUNK

#: ``sql.row(Entry, exclude=("seq",), …)`` for a tree entry's columns, positionally
#: (the INSERT computes ``seq``).
_entry_row = sql.row_builder(
    Entry,
    (
        "session_id",
        "entry_id",
        "parent_id",
        "type",
        "line",
        "created_at",
        "role",
        "content",
        "provider",
        "model",
        "custom_type",
        "summary",
        "tool_name",
        "tool_status",
        "tool_args_json",
        "token_estimate",
        "model_facing",
        "display",
        "compaction_first_kept_entry_id",
        "compaction_tokens_before",
        "branch_from_entry_id",
        "operation_id",
        "part_count",
        "compaction_settings",
    ),
    exclude=("seq",),
)


class Draft:
    """An entry fully prepared outside the transaction (a retry writes the same values).

    ``fields`` are every ``EntryEntity`` field but ``seq``, in the builder's
    order (:data:`agentstore.stores.tree_rows.new_entry`): the INSERT computes
    the seq, and :meth:`entry` then builds the one value object the write
    returns. ``parts`` are the parts to store (none for a plain-text message).
    A draft reads as a settings change (``type``, ``message``, ``data``) for
    :func:`~agentstore.stores.tree_context.apply_settings`.
    """

    __slots__ = ("fields", "operation_id", "parts", "settings")

    def __init__(self, fields: tuple[Any, ...], parts: tuple[MessagePartEntity, ...]) -> None:
        self.fields = fields
        self.parts = parts
        self.operation_id: str = fields[18]
        #: A compaction's ``compaction_settings`` (JSON), set in the transaction.
        self.settings: str | None = None

    def entry(self, seq: int) -> EntryEntity:
        """The stored entry, now that its ``seq`` is known."""
        return new_entry(*self.fields, seq)

    @property
    def id(self) -> str:
        return str(self.fields[0])

    @property
    def session_id(self) -> str:
        return str(self.fields[1])

    @property
    def type(self) -> str:
        return str(self.fields[2])

    @property
    def created_at(self) -> datetime:
        stamp: datetime = self.fields[3]
        return stamp

    @property
    def parent_id(self) -> str | None:
        parent: str | None = self.fields[4]
        return parent

    @property
    def message(self) -> MessageEntity:
        message: MessageEntity = self.fields[5]
        return message

    @property
    def data(self) -> dict[str, Any]:
        value = json.loads(self.fields[7])
        return value if isinstance(value, dict) else {}


class TreeWrites(StoreBase):
    """The tree store's writes (see the module docstring)."""

    #: The owner of the session rows (set by ``TreeStore.__init__``).
    sessions: SessionStore

    # -- appends -----------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        parent_id: str | None,
        message: MessageEntity,
        *,
        model_facing: bool | None = None,
        display: bool | None = None,
        usage: EntryTokenUsageEntity | None = None,
    ) -> EntryEntity:
        """Append a message under ``parent_id`` (``None``: a new root).

        ``model_facing`` and ``display`` override the defaults (user and assistant
        messages are model-facing; every message is displayed); ``usage`` records
        the provider's token counts, which make an assistant message the usage
        anchor of the context.
        """
        validate_message(message)
        data: dict[str, Any] = {}
        if model_facing is not None:
            data["model_facing"] = model_facing
        if display is not None:
            data["display"] = display
        if usage is not None:
            data["usage"] = usage.as_dict()
        return self._append(session_id, parent_id, "message", message=message, data=data)

    def append_custom(self, session_id: str, custom_type: str, data_json: str) -> EntryEntity:
        """Append extension state (not sent to a model) as a new root."""
        return self.append_custom_entry(session_id, None, custom_type, data_json)

    def append_custom_entry(
        self, session_id: str, parent_id: str | None, custom_type: str, data_json: str
    ) -> EntryEntity:
        """Append extension state under ``parent_id``; its data keys are kept as given."""
        require_text(custom_type, "custom_type")
        data = self._data_object(data_json)
        return self._append(session_id, parent_id, "custom", custom_type=custom_type, data=data)

    def append_custom_message(
        self,
        session_id: str,
        parent_id: str | None,
        custom_type: str,
        content: str,
        display: bool,
        details: dict[str, Any] | None = None,
    ) -> EntryEntity:
        """Append extension context that enters the model's context when ``display``."""
        message = MessageEntity(role="custom", content=content)
        validate_message(message, custom_type=custom_type)
        data: dict[str, Any] = {"display": display, "model_facing": display}
        if details:
            data["details"] = details
        return self._append(
            session_id,
            parent_id,
            "custom_message",
            message=message,
            custom_type=custom_type,
            data=data,
        )

    def append_model_change(
        self, session_id: str, parent_id: str | None, provider: str, model: str
    ) -> EntryEntity:
        """Record a provider/model switch."""
        return self._append(
            session_id,
            parent_id,
            "model_change",
            message=MessageEntity(role="", provider=provider, model=model),
            data={},
        )

    def append_thinking_level_change(
        self, session_id: str, parent_id: str | None, thinking_level: str
    ) -> EntryEntity:
        """Record a reasoning/thinking level switch (``""`` is a valid level)."""
        data: dict[str, Any] = {"thinking_level": thinking_level} if thinking_level else {}
        return self._append(session_id, parent_id, "thinking_level_change", data=data)

    def append_branch_summary(
        self,
        session_id: str,
        parent_id: str | None,
        from_id: str,
        summary: str,
        details: dict[str, Any] | None = None,
        from_hook: bool = False,
    ) -> EntryEntity:
        """Record a summary of an abandoned branch (it always enters the context)."""
        data: dict[str, Any] = {}
        if details:
            data["details"] = details
        if from_hook:
            data["from_hook"] = True
        if from_id:
            data["from_id"] = from_id
            data["branch_from_entry_id"] = from_id
        return self._append(session_id, parent_id, "branch_summary", summary=summary, data=data)

    def append_label_change(
        self, session_id: str, parent_id: str | None, target_id: str, label: str | None
    ) -> EntryEntity:
        """Set (``label``) or clear (``None``) the label of entry ``target_id``."""
        require_text(target_id, "target_id")
        data: dict[str, Any] = {"target_id": target_id}
        if label is not None:
            data["label"] = label
        return self._append(session_id, parent_id, "label", data=data)

    def append_session_info(self, session_id: str, parent_id: str | None, name: str) -> EntryEntity:
        """Record the session's display name and rename the session, atomically."""
        require_max_length(name, 500, "name")
        data: dict[str, Any] = {"name": name} if name else {}
        return self._append(session_id, parent_id, "session_info", data=data, rename=name)

    def append_compaction(self, compaction: AppendCompactionInput) -> EntryEntity:
        """Append a compaction, idempotent by ``operation_id`` and safe against races.

        One compaction (with an operation id) may hang off a given parent. A second
        compactor of the same parent gets ``StaleCompactionParent`` carrying the
        winner's entry id; replaying an operation id returns the stored entry; the
        same operation id on another target raises ``CompactionConflict``.
        """
        return self.append_compaction_created(compaction)[0]

    def append_compaction_created(
        self, compaction: AppendCompactionInput
    ) -> tuple[EntryEntity, bool]:
        """:meth:`append_compaction`, and whether this call wrote it (``False``: a replay).

        Decided inside the write transaction (the stored entry is this call's
        draft or an earlier one), so two racing identical requests cannot both
        be told "created" (the API's 201 vs 200, docs/api.md "Replays").
        """
        if compaction is None:
            raise exceptions.ValidationError("compaction input is required", field="compaction")
        operation_id = compaction.operation_id.strip() if compaction.operation_id else ""
        if not operation_id:
            raise exceptions.ValidationError(
                "compaction.operation_id is required", field="compaction.operation_id"
            )
        require_max_length(operation_id, 255, "compaction.operation_id")
        if compaction.tokens_before < 0:
            raise exceptions.ValidationError(
                "compaction.tokens_before must not be negative", field="compaction.tokens_before"
            )
        data: dict[str, Any] = {}
        if compaction.details:
            data["details"] = compaction.details
        if compaction.from_hook:
            data["from_hook"] = True
        if compaction.first_kept_entry_id:
            data["first_kept_entry_id"] = compaction.first_kept_entry_id
            data["compaction_first_kept_entry_id"] = compaction.first_kept_entry_id
        if compaction.tokens_before:
            data["tokens_before"] = compaction.tokens_before
            data["compaction_tokens_before"] = compaction.tokens_before
        draft = self._prepare(
            compaction.session_id,
            compaction.parent_id,
            "compaction",
            message=None,
            custom_type="",
            summary=compaction.summary,
            data=data,
            operation_id=operation_id,
        )
        stored = self._write_draft(compaction.session_id, compaction.parent_id, draft)
        return stored, stored.id == draft.id

    def import_session(self, imported: ImportedSession, *, owner: Any = None) -> SessionEntity:
        """Create a session from a file's entries, keeping their ids, parents and timestamps.

        Every entry is validated and its metadata derived as an append would, and
        each parent must be an earlier entry; the whole session is written in one
        transaction or not at all. An existing id raises ``SessionExists``.
        """
        session_id = require_name(imported.id, "session.id")
        require_text(imported.cwd, "session.cwd")
        require_max_length(imported.name, 500, "session.name")
        require_max_length(imported.parent_session, 255, "session.parent_session")
        created = (
            require_aware(imported.created_at, "session.created_at")
            if imported.created_at is not None
            else self.now()
        )
        drafts: list[Draft] = []
        seen: set[str] = set()
        settings_after: dict[str, Settings] = {}
        for index, item in enumerate(imported.entries):
            where = f"entries[{index}]"
            entry_id = require_name(item.id, f"{where}.id", 128)
            if entry_id in seen:
                raise exceptions.ValidationError(
                    f"{where}.id {entry_id!r} is repeated", field=f"{where}.id"
                )
            if item.parent_id is not None and item.parent_id not in seen:
                raise exceptions.ValidationError(
                    f"{where}.parent_id {item.parent_id!r} is not an earlier entry",
                    field=f"{where}.parent_id",
                )
            seen.add(entry_id)
            message = item.message or MessageEntity(role="")
            if message.role:
                validate_message(message, custom_type=item.custom_type)
            stamp = require_aware(item.created_at, f"{where}.created_at")
            draft = self._prepare(
                session_id,
                item.parent_id,
                item.type,
                message=replace(message, timestamp=stamp),
                custom_type=item.custom_type,
                summary=item.summary,
                data=dict(item.data),
                operation_id="",
                entry_id=entry_id,
            )
            # The settings in force after each entry (parents come first), so
            # each compaction records those at its parent as an append would.
            before = NO_SETTINGS if item.parent_id is None else settings_after[item.parent_id]
            if draft.type == "compaction":
                draft.settings = encode_settings(before)
            settings_after[entry_id] = apply_settings(draft, before)
            drafts.append(draft)
        updated = max([created, *(d.created_at for d in drafts)])

        def write(cursor: SqlCursor) -> None:
            # SessionExists for a taken id, on every backend and in a race.
            self.sessions.insert(
                cursor,
                TREE,
                session_id,
                created_at=created,
                updated_at=updated,
                cwd=imported.cwd,
                name=imported.name,
                parent_session=imported.parent_session,
                header=imported.header,
                owner_id=getattr(owner, "pk", owner),
            )
            for draft in drafts:
                self._insert(cursor, draft)

        self.write(write)
        return SessionEntity(
            id=session_id,
            cwd=imported.cwd,
            name=imported.name,
            parent_session=imported.parent_session,
            created_at=created,
            updated_at=updated,
            header=imported.header,
        )

    # -- the append pipeline -------------------------------------------------------

    @staticmethod
    def _data_object(data_json: str) -> dict[str, Any]:
        value = require_json(data_json or "{}", "data_json")
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise exceptions.ValidationError("data_json must be a JSON object", field="data_json")
        return value

    def _prepare(
        self,
        session_id: str,
        parent_id: str | None,
        entry_type: str,
        *,
        message: MessageEntity | None,
        custom_type: str,
        summary: str,
        data: dict[str, Any],
        operation_id: str,
        entry_id: str = "",
    ) -> Draft:
        """Validate and derive an entry's every value but ``seq``, outside the transaction.

        ``entry_id``: the id to keep (an import); ``""``: a new one.
        """
        require_text(session_id, "session_id")
        if parent_id is not None:
            require_text(parent_id, "parent_id")
            require_max_length(parent_id, 128, "parent_id")
        require_text(entry_type, "type")
        message = message or MessageEntity(role="")
        _require_storable_message(message, custom_type, summary)
        created_at = (
            require_aware(message.timestamp, "message.timestamp")
            if message.timestamp is not None
            else self.now()
        )
        parts = tuple(message.parts)
        derived = derive_metadata(
            entry_type, role=message.role, content=message.content, summary=summary, data=data
        )
        stored_parts = parts
        if message.role and not parts and message.content.strip():
            # What a later read returns for a plain-text message ("legacy text").
            parts = (MessagePartEntity(type="text", text=message.content),)
        # In EntryEntity's field order (tree_rows.new_entry), ``seq`` left for
        # Draft.entry once the INSERT has computed it; the message is built
        # positionally as a read builds it (decision record 0035).
        fields = (
            entry_id or new_id(),
            session_id,
            entry_type,
            created_at,
            parent_id,
            new_message(
                message.role,
                message.content,
                message.provider,
                message.model,
                parts if message.role else (),
                created_at,
            ),
            custom_type,
            encode_data(derived.data),
            summary,
            derived.tool_name,
            derived.tool_status,
            derived.tool_args_json,
            derived.token_estimate,
            derived.model_facing,
            derived.display,
            derived.compaction_first_kept_entry_id,
            derived.compaction_tokens_before,
            derived.branch_from_entry_id,
            operation_id,
        )
        return Draft(fields, stored_parts)

    def _append(
        self,
        session_id: str,
        parent_id: str | None,
        entry_type: str,
        *,
        message: MessageEntity | None = None,
        custom_type: str = "",
        summary: str = "",
        data: dict[str, Any],
        operation_id: str = "",
        rename: str | None = None,
    ) -> EntryEntity:
        draft = self._prepare(
            session_id,
            parent_id,
            entry_type,
            message=message,
            custom_type=custom_type,
            summary=summary,
            data=data,
            operation_id=operation_id,
        )
        return self._write_draft(session_id, parent_id, draft, rename)

    # The session id is looked up, not stored: an id no session can have is
    # "no such session" (a new entry's own id is validated in _prepare).
    @lookup("session_id", missing=no_session)
    def _write_draft(
        self, session_id: str, parent_id: str | None, draft: Draft, rename: str | None = None
    ) -> EntryEntity:
        """Insert a prepared entry (a compaction may resolve to the stored replay)."""
        connection = connections[self.using]
        created_at = draft.created_at

        if not draft.operation_id:
            # The common append: two hand-written statements (touch, insert
            # checking the parent), on the driver's cursor: on SQLite the
            # transaction is the sqlite3 connection's own.
            stamp = sql.adapt_datetime(connection, created_at)
            params = self._insert_params(draft, stamp)
            sessions = self.sessions

            def append(cursor: SqlCursor) -> tuple[int, int]:
                sessions.touch(cursor, session_id, TREE, created_at, adapted=stamp)
                if rename is not None:
                    sessions.update(cursor, session_id, name=rename)
                return self._insert_row(cursor, draft, params)

            _, seq = db.write(append, using=self.using, connection=connection)
            return draft.entry(seq)

        def write(cursor: SqlCursor) -> EntryEntity:
            # A compaction may turn out to be a replay, which must write
            # nothing: lock the session first, touch it only on success.
            self._touch_session(cursor, session_id, None)
            if parent_id is not None:
                self._require_parent(cursor, session_id, parent_id)
            if draft.type == "compaction":
                # What build_context would otherwise climb above the kept
                # context for (decision record 0027); the parent's ancestry never changes.
                found = (
                    NO_SETTINGS if parent_id is None else settings_at(cursor, session_id, parent_id)
                )
                draft.settings = encode_settings(found)
            try:
                # A savepoint, so a lost race leaves the transaction usable
                # (PostgreSQL aborts a transaction on any failed statement).
                with transaction.atomic(using=self.using):
                    inserted = self._insert(cursor, draft)
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
                return self._resolve_compaction_conflict(cursor, draft, exc)
            self._touch_session(cursor, session_id, created_at)
            return inserted

        # Django opens this one: the savepoint above needs it to know.
        return self.write(write, orm=True)

    def _touch_session(self, cursor: SqlCursor, session_id: str, stamp: datetime | None) -> None:
        """Move the tree session's ``updated_at`` forward (``None``: lock only; see ``touch``)."""
        self.sessions.touch(cursor, session_id, TREE, stamp)

    @staticmethod
    def _require_parent(cursor: SqlCursor, session_id: str, parent_id: str) -> None:
        cursor.execute(tree_sql.ENTRY_EXISTS, [session_id, parent_id])
        if cursor.fetchone() is None:
            raise exceptions.ValidationError(
                f"parent_id {parent_id!r} is not an entry of session {session_id}",
                field="parent_id",
            )

    def _insert(self, cursor: SqlCursor, draft: Draft) -> EntryEntity:
        """Insert the draft at the next seq; ``ValidationError`` when its parent is missing."""
        created_at = sql.adapt_datetime(connections[self.using], draft.created_at)
        _, seq = self._insert_row(cursor, draft, self._insert_params(draft, created_at))
        return draft.entry(seq)

    @staticmethod
    def _insert_params(draft: Draft, created_at: Any) -> list[Any]:
        """The INSERT's parameters, built before the transaction (its lock is held for less).

        ``created_at``: the entry's timestamp adapted for the connection.
        """
        (
            entry_id,
            session_id,
            entry_type,
            _,  # the timestamp: ``created_at`` instead
            parent,
            message,
            custom_type,
            data_json,
            summary,
            tool_name,
            tool_status,
            tool_args_json,
            token_estimate,
            model_facing,
            display,
            first_kept,
            tokens_before,
            branch_from,
            operation_id,
        ) = draft.fields
        params = _entry_row(
            session_id,
            entry_id,
            parent,
            entry_type,
            data_json,
            created_at,
            message.role,
            message.content,
            message.provider,
            message.model,
            custom_type,
            summary,
            tool_name,
            tool_status,
            tool_args_json,
            token_estimate,
            model_facing,
            display,
            first_kept,
            tokens_before,
            branch_from,
            operation_id,
            len(draft.parts),
            draft.settings,
        )
        # The INSERT's own parameters after the row: the session (its seq),
        # and for a child the session and parent it checks.
        params.append(session_id)
        if parent is not None:
            params += (session_id, parent)
        return params

    @staticmethod
    def _insert_row(cursor: SqlCursor, draft: Draft, params: list[Any]) -> tuple[int, int]:
        """Run the INSERT (and the parts'); the new row's ``(pk, seq)``.

        ``ValidationError`` when the parent is missing: the INSERT checks it
        itself (``WHERE EXISTS``) and then inserts nothing.
        """
        parent = draft.parent_id
        cursor.execute(
            tree_sql.INSERT_ENTRY if parent is None else tree_sql.INSERT_CHILD_ENTRY, params
        )
        inserted = cursor.fetchone()
        if inserted is None:
            raise exceptions.ValidationError(
                f"parent_id {parent!r} is not an entry of session {draft.session_id}",
                field="parent_id",
            )
        pk, seq = inserted
        if draft.parts:
            cursor.executemany(tree_sql.INSERT_PART, part_rows(pk, draft.parts))
        return int(pk), int(seq)

    def _resolve_compaction_conflict(
        self, cursor: SqlCursor, draft: Draft, error: IntegrityError
    ) -> EntryEntity:
        session_id, parent_id = draft.session_id, draft.parent_id
        existing = select_entries(cursor, "e.operation_id = %s", [draft.operation_id], order="")
        if existing:
            stored = existing[0]
            same_target = (
                stored.session_id == session_id
                and stored.type == "compaction"
                and stored.parent_id == parent_id
            )
            if same_target:
                return stored
            raise exceptions.CompactionConflict(
                f"compaction operation id {draft.operation_id!r} targets another branch"
            )
        parent_clause = "e.parent_id IS NULL" if parent_id is None else "e.parent_id = %s"
        params: list[Any] = [session_id] + ([] if parent_id is None else [parent_id])
        winners = select_entries(
            cursor,
            f"e.session_id = %s AND {parent_clause} AND e.type = 'compaction' "
            "AND e.operation_id <> ''",
            params,
            order="",
        )
        if winners:
            raise exceptions.StaleCompactionParent(
                f"stale compaction parent: {parent_id or '(root)'} was already compacted "
                f"by entry {winners[0].id}",
                winner_entry_id=winners[0].id,
            )
        raise error

    # -- deleting a branch -----------------------------------------------------------

    @lookup("session_id", "entry_id", missing=none)
    def delete_entry_branch(self, session_id: str, entry_id: str) -> None:
        """Delete an entry and all its descendants (with their parts); touch the session."""
        stamp = self.now()

        def write(cursor: SqlCursor) -> None:
            try:
                self._touch_session(cursor, session_id, stamp)
            except exceptions.NoSession:
                return
            cursor.execute(
                tree_sql.descendants(cursor.db.vendor),
                [session_id, entry_id, session_id, session_id],
            )
            pks = [row[0] for row in cursor.fetchall()]
            for start in range(0, len(pks), _CHUNK):
                chunk = pks[start : start + _CHUNK]
                cursor.execute(tree_sql.delete_parts(len(chunk)), chunk)
                cursor.execute(tree_sql.delete_entries(len(chunk)), chunk)

        self.write(write)


def _require_storable_message(message: MessageEntity, custom_type: str, summary: str) -> None:
    """Refuse text no column can keep (NUL, a lone surrogate), naming the field.

    The one text rule (:func:`~agentstore.validation.require_storable_text`), as the
    API applies it to the same fields: without it SQLite would keep a NUL that
    PostgreSQL refuses with a raw ``DataError``, and a lone surrogate would fail
    as a ``UnicodeEncodeError`` inside the write. A scan per field: well under a
    microsecond for a 1 KB message.
    """
    for field, value in (
        ("message.role", message.role),
        ("message.content", message.content),
        ("message.provider", message.provider),
        ("message.model", message.model),
        ("custom_type", custom_type),
        ("summary", summary),
    ):
        require_storable_text(value, field)
    for index, part in enumerate(message.parts):
        for field, value in (
            ("text", part.text),
            ("type", part.type),
            ("mime_type", part.mime_type),
            ("name", part.name),
        ):
            require_storable_text(value, f"message.parts[{index}].{field}")

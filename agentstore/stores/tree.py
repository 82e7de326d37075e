"""TreeStore: sessions as trees of entries — messages, compactions, branches, labels.

The librecode session repository over agentstore's schema::

    store = TreeStore()
    session = store.create_session("/repo")
    hi = MessageEntity(role="user", content="hi")
    user = store.append_message(session.id, None, hi)
    hello = MessageEntity(role="assistant", content="hello")
    reply = store.append_message(session.id, user.id, hello)
    context = store.build_context(session.id, reply.id)

Every append is one short write transaction that touches the session row (on
PostgreSQL that row lock serialises appends to one session; on SQLite the writer
queue does), checks the parent, inserts the entry at the next ``seq`` and its
message parts. A ``None`` parent makes a new root: the store never guesses "the
current leaf" for you (``branch(session_id, "")`` finds the most recent childless
entry when you need it).

Reads run in one snapshot (``agentstore.db.read_snapshot``) and never take the
write lock. "Append order" is ``(created_at, seq)``: entries sort by their
timestamp (caller-supplied message timestamps are kept), ties by insertion.
Hot paths send hand-written SQL (:mod:`agentstore.sql.tree`) on
:mod:`agentstore.db`'s cursor: a plain append (any kind but a compaction) is one
body of two statements for :func:`agentstore.db.write`, which on SQLite opens
the transaction on the ``sqlite3`` connection itself, and reads build their
entities with positional builders (:mod:`agentstore.types.frozen`).
See ``docs/tree-store.md`` for the measured figures.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction

from agentstore import db, exceptions, sql
from agentstore.db import SqlCursor, is_unique_violation
from agentstore.ids import new_id
from agentstore.models import Entry, MessagePart
from agentstore.models.sessions import SessionKind
from agentstore.sql import tree as tree_sql
from agentstore.stores.base import Clock, StoreBase
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree_context import (
    NO_SETTINGS,
    Settings,
    apply_settings,
    build_context,
    entries_needing_parts,
)
from agentstore.stores.tree_metadata import derive_metadata
from agentstore.stores.tree_parts import message_sender, validate_message
from agentstore.types.frozen import positional_builder, require_fields
from agentstore.types.sessions import SessionRecord
from agentstore.types.tree import (
    AppendCompactionInput,
    EntryEntity,
    EntryTokenUsageEntity,
    ImportedSession,
    MessageEntity,
    MessagePartEntity,
    SessionContextEntity,
    SessionEntity,
    SessionMessageEntity,
    TreeNodeEntity,
    TreeRowEntity,
)
from agentstore.validation import (
    could_be_stored,
    require_aware,
    require_json,
    require_max_length,
    require_name,
    require_text,
)

__all__ = ["TreeStore"]

TREE = SessionKind.TREE.value
# Positions in the selected rows, and the chunk size (agentstore/sql/tree.py).
_PK = tree_sql.PK
_ROLE = tree_sql.ROLE
_CONTENT = tree_sql.CONTENT
_PART_COUNT = tree_sql.PART_COUNT
_C_PK = tree_sql.C_PK
_C_ID = tree_sql.C_ID
_C_TYPE = tree_sql.C_TYPE
_C_LINE = tree_sql.C_LINE
_C_CREATED = tree_sql.C_CREATED
_C_ROLE = tree_sql.C_ROLE
_C_CONTENT = tree_sql.C_CONTENT
_C_PROVIDER = tree_sql.C_PROVIDER
_C_MODEL = tree_sql.C_MODEL
_C_SUMMARY = tree_sql.C_SUMMARY
_C_MODEL_FACING = tree_sql.C_MODEL_FACING
_C_FIRST_KEPT = tree_sql.C_FIRST_KEPT
_C_PARTS = tree_sql.C_PARTS
_C_SETTINGS = tree_sql.C_SETTINGS
_CHUNK = tree_sql.CHUNK


_to_datetime = sql.utc

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


def _as_bytes(value: Any) -> bytes:
    return b"" if value is None else bytes(value)


def _make_data_encoder() -> Callable[[dict[str, Any]], str]:
    """``json.dumps(data, separators=(",", ":"), ensure_ascii=False)`` for a dict, lean.

    ``JSONEncoder.encode`` builds its C encoder in Python on every call (an
    ``isinstance``, ``iterencode``'s closure and nine attribute reads: most of
    encoding a small dict). This calls the same C factory with the same
    arguments — a fresh ``markers`` dict each time, so a cycle is still
    ``ValueError`` — and joins the chunks as ``encode`` does. Same text.
    """
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - no C accelerator
        return encoder.encode
    default, string = encoder.default, json.encoder.encode_basestring

    def encode(data: dict[str, Any]) -> str:
        # The arguments JSONEncoder.iterencode passes, in its order.
        return "".join(make({}, default, string, None, ":", ",", False, False, True)(data, 0))

    return encode


#: The data JSON of an entry (once per append).
_encode_data: Callable[[dict[str, Any]], str] = _make_data_encoder()


class _Draft:
    """An entry fully prepared outside the transaction (a retry writes the same values)."""

    __slots__ = ("entity", "operation_id", "parts", "settings")

    def __init__(self, entity: EntryEntity, parts: tuple[MessagePartEntity, ...]) -> None:
        self.entity = entity
        self.parts = parts
        self.operation_id = entity.operation_id
        #: A compaction's ``compaction_settings`` (JSON), set in the transaction.
        self.settings: str | None = None


class TreeStore(StoreBase):
    """Sessions as entry trees (the librecode ``SessionRepository`` behaviour)."""

    def __init__(self, *, using: str = "default", clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        #: The owner of the session rows (this store keeps entries and parts).
        self.sessions = SessionStore(using=using, clock=clock)

    # -- sessions ----------------------------------------------------------------

    def create_session(
        self, cwd: str, name: str = "", parent_session: str = "", *, owner: Any = None
    ) -> SessionEntity:
        """Create a top-level (or child, with ``parent_session``) session in ``cwd``."""
        require_text(cwd, "session.cwd")
        record = self.sessions.create(
            TREE, cwd=cwd, name=name, parent_session=parent_session, owner=owner
        )
        return self._session_entity(record)

    @staticmethod
    def _session_entity(row: SessionRecord) -> SessionEntity:
        return SessionEntity(
            id=row.id,
            cwd=row.cwd,
            name=row.name,
            parent_session=row.parent_session,
            created_at=row.created_at,
            updated_at=row.updated_at,
            header=row.header,
        )

    def get_session(self, session_id: str) -> SessionEntity | None:
        """Return the session, or ``None`` when there is no tree session with that id."""
        row = self.sessions.get(session_id, TREE)
        return None if row is None else self._session_entity(row)

    def latest_session(self, cwd: str) -> SessionEntity | None:
        """Return the most recently updated top-level session of ``cwd``."""
        rows = self.sessions.list(TREE, cwd=cwd, top_level=True, limit=1)
        return self._session_entity(rows[0]) if rows else None

    def list_sessions(self, cwd: str) -> list[SessionEntity]:
        """Top-level sessions of ``cwd``, most recently updated first."""
        rows = self.sessions.list(TREE, cwd=cwd, top_level=True)
        return [self._session_entity(row) for row in rows]

    def list_child_sessions(self, parent_id: str) -> list[SessionEntity]:
        """Sessions whose parent is ``parent_id``, most recently updated first."""
        rows = self.sessions.list(TREE, parent_session=parent_id)
        return [self._session_entity(row) for row in rows]

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its entries, parts and owned tasks; keep child sessions.

        ``SessionStore.delete`` for a tree session (the agent task that ran in
        it goes too). A missing session is not an error.
        """
        self.sessions.delete(session_id, TREE)

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
        return stored, stored.id == draft.entity.id

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
        drafts: list[_Draft] = []
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
            )
            draft = _Draft(replace(draft.entity, id=entry_id), draft.parts)
            # The settings in force after each entry (parents come first), so
            # each compaction records those at its parent as an append would.
            before = NO_SETTINGS if item.parent_id is None else settings_after[item.parent_id]
            if draft.entity.type == "compaction":
                draft.settings = _encode_settings(before)
            settings_after[entry_id] = apply_settings(draft.entity, before)
            drafts.append(draft)
        updated = max([created, *(d.entity.created_at for d in drafts)])

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
    ) -> _Draft:
        require_text(session_id, "session_id")
        if parent_id is not None:
            require_text(parent_id, "parent_id")
            require_max_length(parent_id, 128, "parent_id")
        require_text(entry_type, "type")
        message = message or MessageEntity(role="")
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
        # The slot-setting constructors of the row mapper (decision 312): every
        # field given, the same objects as the dataclasses' own __init__ makes.
        entity = _new_entry(
            id=new_id(),
            session_id=session_id,
            parent_id=parent_id,
            type=entry_type,
            created_at=created_at,
            message=_new_message(
                role=message.role,
                content=message.content,
                provider=message.provider,
                model=message.model,
                parts=parts if message.role else (),
                timestamp=created_at,
            ),
            custom_type=custom_type,
            data_json=_encode_data(derived.data),
            summary=summary,
            tool_name=derived.tool_name,
            tool_status=derived.tool_status,
            tool_args_json=derived.tool_args_json,
            token_estimate=derived.token_estimate,
            model_facing=derived.model_facing,
            display=derived.display,
            compaction_first_kept_entry_id=derived.compaction_first_kept_entry_id,
            compaction_tokens_before=derived.compaction_tokens_before,
            branch_from_entry_id=derived.branch_from_entry_id,
            operation_id=operation_id,
            seq=0,
        )
        return _Draft(entity, stored_parts)

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

    def _write_draft(
        self, session_id: str, parent_id: str | None, draft: _Draft, rename: str | None = None
    ) -> EntryEntity:
        """Insert a prepared entry (a compaction may resolve to the stored replay)."""
        connection = connections[self.using]
        entity = draft.entity

        if not draft.operation_id:
            # The common append: two hand-written statements (touch, insert
            # checking the parent), on the driver's cursor: on SQLite the
            # transaction is the sqlite3 connection's own.
            stamp = sql.adapt_datetime(connection, entity.created_at)
            params = self._insert_params(draft, stamp)
            sessions = self.sessions

            def append(cursor: SqlCursor) -> tuple[int, int]:
                sessions.touch(cursor, session_id, TREE, entity.created_at, adapted=stamp)
                if rename is not None:
                    sessions.update(cursor, session_id, name=rename)
                return self._insert_row(cursor, draft, params)

            _, seq = db.write(append, using=self.using, connection=connection)
            # The entity is this call's own until it is returned: its seq is
            # set in place rather than by copying every field (``replace``).
            _set_seq(entity, seq)
            return entity

        def write(cursor: SqlCursor) -> EntryEntity:
            # A compaction may turn out to be a replay, which must write
            # nothing: lock the session first, touch it only on success.
            self._touch_session(cursor, session_id, None)
            if parent_id is not None:
                self._require_parent(cursor, session_id, parent_id)
            if entity.type == "compaction":
                # What build_context would otherwise climb above the kept
                # context for (docs/decisions.md, "context: settings on the
                # compaction"); the parent's ancestry never changes.
                found = (
                    NO_SETTINGS
                    if parent_id is None
                    else self._settings_at(cursor, session_id, parent_id)
                )
                draft.settings = _encode_settings(found)
            try:
                # A savepoint, so a lost race leaves the transaction usable
                # (PostgreSQL aborts a transaction on any failed statement).
                with transaction.atomic(using=self.using):
                    inserted = self._insert(cursor, draft)
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
                return self._resolve_compaction_conflict(cursor, draft, exc)
            self._touch_session(cursor, session_id, entity.created_at)
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

    def _insert(self, cursor: SqlCursor, draft: _Draft) -> EntryEntity:
        """Insert the draft at the next seq; ``ValidationError`` when its parent is missing."""
        created_at = sql.adapt_datetime(connections[self.using], draft.entity.created_at)
        _, seq = self._insert_row(cursor, draft, self._insert_params(draft, created_at))
        return _with_seq(draft.entity, seq)

    @staticmethod
    def _insert_params(draft: _Draft, created_at: Any) -> list[Any]:
        """The INSERT's parameters, built before the transaction (its lock is held for less).

        ``created_at``: the entry's timestamp adapted for the connection.
        """
        e = draft.entity
        parent = e.parent_id
        message = e.message
        params = _entry_row(
            e.session_id,
            e.id,
            parent,
            e.type,
            e.data_json,
            created_at,
            message.role,
            message.content,
            message.provider,
            message.model,
            e.custom_type,
            e.summary,
            e.tool_name,
            e.tool_status,
            e.tool_args_json,
            e.token_estimate,
            e.model_facing,
            e.display,
            e.compaction_first_kept_entry_id,
            e.compaction_tokens_before,
            e.branch_from_entry_id,
            e.operation_id,
            len(draft.parts),
            draft.settings,
        )
        # The INSERT's own parameters after the row: the session (its seq),
        # and for a child the session and parent it checks.
        params.append(e.session_id)
        if parent is not None:
            params += (e.session_id, parent)
        return params

    @staticmethod
    def _insert_row(cursor: SqlCursor, draft: _Draft, params: list[Any]) -> tuple[int, int]:
        """Run the INSERT (and the parts'); the new row's ``(pk, seq)``.

        ``ValidationError`` when the parent is missing: the INSERT checks it
        itself (``WHERE EXISTS``) and then inserts nothing.
        """
        e = draft.entity
        parent = e.parent_id
        cursor.execute(
            tree_sql.INSERT_ENTRY if parent is None else tree_sql.INSERT_CHILD_ENTRY, params
        )
        inserted = cursor.fetchone()
        if inserted is None:
            raise exceptions.ValidationError(
                f"parent_id {parent!r} is not an entry of session {e.session_id}",
                field="parent_id",
            )
        pk, seq = inserted
        if draft.parts:
            cursor.executemany(tree_sql.INSERT_PART, _part_rows(pk, draft.parts))
        return int(pk), int(seq)

    def _resolve_compaction_conflict(
        self, cursor: SqlCursor, draft: _Draft, error: IntegrityError
    ) -> EntryEntity:
        e = draft.entity
        existing = self._select_entries(
            cursor, "e.operation_id = %s", [draft.operation_id], order=""
        )
        if existing:
            stored = existing[0]
            same_target = (
                stored.session_id == e.session_id
                and stored.type == "compaction"
                and stored.parent_id == e.parent_id
            )
            if same_target:
                return stored
            raise exceptions.CompactionConflict(
                f"compaction operation id {draft.operation_id!r} targets another branch"
            )
        parent_clause = "e.parent_id IS NULL" if e.parent_id is None else "e.parent_id = %s"
        params: list[Any] = [e.session_id] + ([] if e.parent_id is None else [e.parent_id])
        winners = self._select_entries(
            cursor,
            f"e.session_id = %s AND {parent_clause} AND e.type = 'compaction' "
            "AND e.operation_id <> ''",
            params,
            order="",
        )
        if winners:
            raise exceptions.StaleCompactionParent(
                f"stale compaction parent: {e.parent_id or '(root)'} was already compacted "
                f"by entry {winners[0].id}",
                winner_entry_id=winners[0].id,
            )
        raise error

    # -- reads -----------------------------------------------------------------------

    def _select_entries(
        self,
        cursor: SqlCursor,
        where: str,
        params: Sequence[Any],
        *,
        order: str = "e.created_at, e.seq",
        hydrate: bool = True,
    ) -> list[EntryEntity]:
        cursor.execute(tree_sql.select_entries(cursor.db.vendor, where, order), list(params))
        rows = cursor.fetchall()
        return self._build_entries(cursor, rows, hydrate)

    def _build_entries(
        self, cursor: SqlCursor, rows: Sequence[Sequence[Any]], hydrate: bool
    ) -> list[EntryEntity]:
        text_stamps = cursor.db.vendor == "sqlite"
        if not hydrate:
            return _entries_from_rows(rows, None, text_stamps=text_stamps)
        parts = self._load_parts(cursor, [row[_PK] for row in rows if row[_PART_COUNT]])
        return _entries_from_rows(rows, parts, text_stamps=text_stamps)

    @staticmethod
    def _load_parts(cursor: SqlCursor, pks: list[int]) -> dict[int, list[MessagePartEntity]]:
        found: dict[int, list[MessagePartEntity]] = defaultdict(list)
        for start in range(0, len(pks), _CHUNK):
            chunk = pks[start : start + _CHUNK]
            cursor.execute(tree_sql.load_parts(len(chunk)), chunk)
            for pk, kind, text, mime, name, width, height, data in cursor.fetchall():
                # Positional, in require_fields' order (type, text, mime_type, name,
                # data, width, height).
                found[pk].append(_new_part(kind, text, mime, name, _as_bytes(data), width, height))
        return found

    def _cursor_read(self, fn: Callable[[SqlCursor], Any]) -> Any:
        def run() -> Any:
            with db.cursor(self.using) as cursor:
                return fn(cursor)

        return self.read(run)

    def entry(self, session_id: str, entry_id: str) -> EntryEntity | None:
        """Return one entry of the session, or ``None``."""
        if not could_be_stored(entry_id):
            return None  # never stored; PostgreSQL could not even be asked (NUL)
        found = self._cursor_read(
            lambda c: self._select_entries(
                c, "e.session_id = %s AND e.entry_id = %s", [session_id, entry_id], order=""
            )
        )
        return found[0] if found else None

    def entries(self, session_id: str) -> list[EntryEntity]:
        """All entries of the session in append order (timestamp, then insertion)."""
        return list(
            self._cursor_read(lambda c: self._select_entries(c, "e.session_id = %s", [session_id]))
        )

    def entries_after(
        self, session_id: str, after_seq: int = 0, limit: int = 0
    ) -> list[EntryEntity]:
        """Entries with ``seq > after_seq`` in ``seq`` order, at most ``limit`` (≤ 0: all).

        The cursor read behind paging and tailing (the REST API's entry list and
        live follow): ``seq`` only grows, so a reader that remembers the last
        ``seq`` it saw never misses or repeats an entry.
        """
        if isinstance(after_seq, bool) or not isinstance(after_seq, int):
            raise exceptions.ValidationError("after_seq must be an integer", field="after_seq")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise exceptions.ValidationError("limit must be an integer", field="limit")
        order = "e.seq" + (f" LIMIT {int(limit)}" if limit > 0 else "")
        return list(
            self._cursor_read(
                lambda c: self._select_entries(
                    c, "e.session_id = %s AND e.seq > %s", [session_id, after_seq], order=order
                )
            )
        )

    def leaf_entry(self, session_id: str) -> EntryEntity | None:
        """The most recent entry by timestamp (not necessarily childless)."""
        found = self._cursor_read(
            lambda c: self._select_entries(
                c,
                "e.session_id = %s",
                [session_id],
                order="e.created_at DESC, e.seq DESC LIMIT 1",
            )
        )
        return found[0] if found else None

    def children(self, session_id: str, parent_id: str | None) -> list[EntryEntity]:
        """Direct children of ``parent_id`` (``None``: the roots), in append order."""
        if parent_id is None:
            where, params = "e.session_id = %s AND e.parent_id IS NULL", [session_id]
        else:
            where, params = "e.session_id = %s AND e.parent_id = %s", [session_id, parent_id]
        return list(self._cursor_read(lambda c: self._select_entries(c, where, params)))

    def branch(self, session_id: str, entry_id: str = "", limit: int = 0) -> list[EntryEntity]:
        """The path from the root to ``entry_id`` (``""``: the most recent childless entry).

        ``limit > 0`` returns only the last ``limit`` entries of that path (still
        root-first), reading no more than that: the page of a long branch that
        ends at ``entry_id``; the page above it ends at the first one's parent.
        Raises ``NoEntry`` when an explicit ``entry_id`` is not in the session.

        With an explicit ``entry_id`` this is the "last N entries on the branch"
        read an agent loop makes every turn: one recursive SELECT, which is its
        own snapshot, so no read transaction is opened around it unless some of
        the entries have message parts to load by a second statement (then the
        whole read runs again in one snapshot; docs/decisions.md, "reads: one
        statement needs no transaction").
        """
        limit = _require_count(limit, "limit")

        def query(cursor: SqlCursor) -> list[EntryEntity]:
            rows = self._branch_rows(
                cursor, session_id, entry_id, tree_sql.select_list(cursor.db.vendor), limit
            )
            return self._build_entries(cursor, rows, True)

        if entry_id:
            # One statement: its own snapshot, no read transaction around it.
            with db.cursor(self.using) as cursor:
                rows = self._branch_rows(
                    cursor, session_id, entry_id, tree_sql.select_list(cursor.db.vendor), limit
                )
                if not any(row[_PART_COUNT] for row in rows):
                    return self._build_entries(cursor, rows, True)  # no statement: no parts
        return list(self._cursor_read(query))

    def branch_length(self, session_id: str, entry_id: str = "", at_most: int = 0) -> int:
        """How many entries the path root → ``entry_id`` has, counting no further than ``at_most``.

        A bounded question for callers that refuse to build huge results (the
        API's ``/context``): ``at_most + 1`` means "longer than ``at_most``".
        ``at_most <= 0`` counts the whole path. Raises ``NoEntry`` like :meth:`branch`.
        """
        at_most = _require_count(at_most, "at_most")

        def query(cursor: SqlCursor) -> int:
            limit = at_most + 1 if at_most > 0 else 0
            return len(self._branch_rows(cursor, session_id, entry_id, "e.id", limit))

        return int(self._cursor_read(query))

    def _branch_rows(
        self, cursor: SqlCursor, session_id: str, entry_id: str, columns: str, limit: int = 0
    ) -> list[Sequence[Any]]:
        """The selected rows of the path root → ``entry_id`` (``""``: the latest leaf).

        ``limit > 0``: only the ``limit`` rows nearest ``entry_id``.
        """
        if not entry_id:
            cursor.execute(tree_sql.LATEST_LEAF, [session_id])
            row = cursor.fetchone()
            if row is None:
                return []
            entry_id = row[0]
        # Walk parent links upwards inside the session. The depth cap (the
        # session's highest seq bounds any simple path) and the visited set
        # below keep a corrupt parent cycle from looping.
        bounded = limit > 0
        cursor.execute(
            tree_sql.branch(cursor.db.vendor, columns, bounded),
            [session_id, entry_id, session_id, limit - 1 if bounded else session_id],
        )
        rows = cursor.fetchall()
        if not rows:
            raise exceptions.NoEntry(f'entry "{entry_id}" not found in session "{session_id}"')
        # Both backends emit a recursive CTE's rows level by level, but SQL does
        # not promise it; sorting in Python only when needed is cheaper than an
        # ORDER BY over 10,000 wide rows.
        depths = [row[0] for row in rows]
        if depths != sorted(depths):
            rows.sort(key=lambda row: row[0])
        if len({row[1] for row in rows}) == len(rows):  # no entry twice: no cycle
            path = [row[2:] for row in rows]
        else:  # a corrupt parent cycle: the path ends before its first repeat
            seen: set[int] = set()
            path = []
            for row in rows:
                if row[1] in seen:
                    break
                seen.add(row[1])
                path.append(row[2:])
        path.reverse()
        return path

    def tree_page(
        self,
        session_id: str,
        after_entry_id: str = "",
        limit: int = 100,
        *,
        after_depth: int | None = None,
    ) -> list[TreeRowEntity]:
        """A page of the forest listed flat, depth first (the order :meth:`tree` nests).

        Rows come after ``after_entry_id`` (``""``: from the first root), at most
        ``limit``. The walk goes from that entry to the next one in pre-order
        with indexed lookups (first child; else the next sibling of the entry or
        of its nearest ancestor that has one), so a page costs about ``limit``
        index probes and the memory of ``limit`` entries however big the
        session is. ``after_depth`` is the depth of ``after_entry_id`` when the
        caller knows it (the API's cursor carries it); otherwise it is counted.
        Raises ``NoEntry`` when ``after_entry_id`` is not in the session.
        """
        limit = _require_count(limit, "limit")
        if limit < 1:
            raise exceptions.ValidationError("limit must be positive", field="limit")

        def query(cursor: SqlCursor) -> list[TreeRowEntity]:
            walk = _TreeWalk(cursor, session_id)
            if after_entry_id:
                current = walk.key(after_entry_id)
                if current is None:
                    raise exceptions.NoEntry(
                        f'entry "{after_entry_id}" not found in session "{session_id}"'
                    )
                if after_depth is None:
                    depth = len(self._branch_rows(cursor, session_id, after_entry_id, "e.id")) - 1
                else:
                    depth = after_depth
                found = walk.after(current, depth)
            else:
                found = walk.first_root()
            keys: list[tuple[_Key, int]] = []
            while found is not None and len(keys) < limit:
                keys.append(found)
                found = walk.after(*found)
            if not keys:
                return []
            ids = [key[0] for key, _ in keys]
            marks = ", ".join(["%s"] * len(ids))
            entries = {
                entry.id: entry
                for entry in self._select_entries(
                    cursor,
                    f"e.session_id = %s AND e.entry_id IN ({marks})",
                    [session_id, *ids],
                    order="",
                )
            }
            cursor.execute(tree_sql.child_counts(len(ids)), [session_id, *ids])
            children = dict(cursor.fetchall())
            return [
                TreeRowEntity(
                    entry=entries[key[0]], depth=depth, child_count=int(children.get(key[0], 0))
                )
                for key, depth in keys
                if key[0] in entries
            ]

        return list(self._cursor_read(query))

    def tree(self, session_id: str) -> list[TreeNodeEntity]:
        """The session as a forest: roots in append order, each with its descendants."""
        entries = self.entries(session_id)
        by_parent: dict[str, list[EntryEntity]] = defaultdict(list)
        for entry in entries:
            by_parent[entry.parent_id or ""].append(entry)
        roots = by_parent.get("", [])
        # Depth-first without recursion (a chain can be 100,000 entries deep):
        # list every reachable entry after its descendants, then build the
        # immutable nodes bottom-up. The visited set keeps a corrupt cycle out.
        visited: set[str] = set()
        order: list[EntryEntity] = []
        stack: list[tuple[EntryEntity, bool]] = [(root, False) for root in reversed(roots)]
        while stack:
            entry, children_done = stack.pop()
            if children_done:
                order.append(entry)
                continue
            if entry.id in visited:
                continue
            visited.add(entry.id)
            stack.append((entry, True))
            stack.extend(
                (child, False)
                for child in reversed(by_parent.get(entry.id, []))
                if child.id not in visited
            )
        built: dict[str, TreeNodeEntity] = {}
        for entry in order:
            built[entry.id] = TreeNodeEntity(
                entry=entry,
                children=tuple(
                    built[child.id] for child in by_parent.get(entry.id, []) if child.id in built
                ),
            )
        return [built[root.id] for root in roots if root.id in built]

    def label(self, session_id: str, target_id: str) -> str | None:
        """The label of ``target_id`` (the last label entry for it wins; ``None`` if cleared)."""
        labels = self._cursor_read(
            lambda c: self._select_entries(
                c, "e.session_id = %s AND e.type = 'label'", [session_id], hydrate=False
            )
        )
        current: str | None = None
        for entry in labels:
            data = entry.data
            if data.get("target_id") == target_id:
                value = data.get("label")
                current = value if isinstance(value, str) else None
        return current

    def messages(self, session_id: str) -> list[SessionMessageEntity]:
        """Every message of the session (all branches, hidden ones too), in append order."""
        return self._messages("e.session_id = %s AND e.role <> ''", [session_id])

    def transcript_messages(self, session_id: str) -> list[SessionMessageEntity]:
        """The session's displayed messages, in append order."""
        return self._messages(
            "e.session_id = %s AND e.role <> '' AND e.display = %s", [session_id, True]
        )

    def messages_page(
        self,
        session_id: str,
        after_entry_id: str = "",
        limit: int = 100,
        *,
        displayed_only: bool = False,
    ) -> list[SessionMessageEntity]:
        """A page of :meth:`messages` (``displayed_only``: of :meth:`transcript_messages`).

        The messages after the one of entry ``after_entry_id`` (``""``: from the
        first) in the same append order, at most ``limit``: one range scan of the
        ``(session, created_at, seq)`` index whatever the session's size. Raises
        ``NoEntry`` when ``after_entry_id`` is not in the session (deleted since).
        """
        limit = _require_count(limit, "limit")
        if limit < 1:
            raise exceptions.ValidationError("limit must be positive", field="limit")
        where = "e.session_id = %s AND e.role <> ''"
        params: list[Any] = [session_id]
        if displayed_only:
            where += " AND e.display = %s"
            params.append(True)

        def query(cursor: SqlCursor) -> list[EntryEntity]:
            sql_where, sql_params = where, list(params)
            if after_entry_id:
                cursor.execute(tree_sql.sort_key(cursor.db.vendor), [session_id, after_entry_id])
                key = cursor.fetchone()
                if key is None:
                    raise exceptions.NoEntry(
                        f'entry "{after_entry_id}" not found in session "{session_id}"'
                    )
                # (created_at, seq) > key, spelled with a plain lower bound
                # first so both backends' planners start the index range there.
                sql_where += " AND e.created_at >= %s AND (e.created_at > %s OR e.seq > %s)"
                sql_params += [key[0], key[0], key[1]]
            return self._select_entries(
                cursor, sql_where, sql_params, order=f"e.created_at, e.seq LIMIT {int(limit)}"
            )

        return [_message_from_entry(entry) for entry in self._cursor_read(query)]

    def message_for_entry(self, session_id: str, entry_id: str) -> SessionMessageEntity | None:
        """The message an entry carries, or ``None`` (unknown entry or no message)."""
        found = self._messages(
            "e.session_id = %s AND e.entry_id = %s AND e.role <> ''", [session_id, entry_id]
        )
        return found[0] if found else None

    def _messages(self, where: str, params: list[Any]) -> list[SessionMessageEntity]:
        entries = self._cursor_read(lambda c: self._select_entries(c, where, params))
        return [_message_from_entry(entry) for entry in entries]

    def context_has_image_parts(self, session_id: str, entry_id: str) -> bool:
        """Whether the entry or any ancestor carries an image part (unknown id: ``False``)."""

        def query(cursor: SqlCursor) -> bool:
            cursor.execute(
                tree_sql.has_image_part(cursor.db.vendor),
                [session_id, entry_id, session_id, session_id],
            )
            return cursor.fetchone() is not None

        return bool(self._cursor_read(query))

    def build_context(self, session_id: str, leaf_id: str) -> SessionContextEntity:
        """What the model would see at ``leaf_id`` (required: there is no default leaf).

        Reads only what the context uses (docs/tree-store.md, "Context
        building"): the entries from the latest compaction's first-kept entry to
        the leaf, plus the nearest model and thinking-level changes above them,
        so a compacted long session costs what its tail costs.
        """
        if not leaf_id or not leaf_id.strip():
            raise exceptions.ValidationError("context entry id is required", field="leaf_id")

        def query(cursor: SqlCursor) -> SessionContextEntity:
            # Lean on purpose: the rows are read as light row views, and only
            # the entries the context will actually include get their parts
            # loaded and their messages built.
            rows, settings = self._context_rows(cursor, session_id, leaf_id, 0)
            branch = [_ContextEntry(row) for row in rows]
            wanted = entries_needing_parts(branch)
            rows_by_id = {entry.id: entry for entry in branch if entry.id in wanted}
            parts = self._load_parts(
                cursor,
                [entry.row[_C_PK] for entry in rows_by_id.values() if entry.row[_C_PARTS]],
            )
            for entry in rows_by_id.values():
                row = entry.row
                entry.parts = _message_parts(row[_C_ROLE], row[_C_CONTENT], parts.get(row[_C_PK]))
            return build_context(branch, settings)

        result: SessionContextEntity = self._cursor_read(query)
        return result

    def context_length(self, session_id: str, leaf_id: str, at_most: int = 0) -> int:
        """How many entries :meth:`build_context` reads at ``leaf_id`` (up to ``at_most + 1``).

        The entries from the latest compaction's first-kept entry (or the root,
        without a compaction) to the leaf: what the API's ``MAX_CONTEXT_BRANCH``
        bounds. ``at_most + 1`` means "longer than ``at_most``"; ``at_most <= 0``
        counts them all. Raises ``NoEntry`` like :meth:`build_context`.
        """
        at_most = _require_count(at_most, "at_most")

        def query(cursor: SqlCursor) -> int:
            limit = at_most + 1 if at_most > 0 else 0
            rows, _ = self._context_rows(cursor, session_id, leaf_id, limit, settings=False)
            return len(rows)

        return int(self._cursor_read(query))

    def _context_rows(
        self,
        cursor: SqlCursor,
        session_id: str,
        leaf_id: str,
        limit: int,
        *,
        settings: bool = True,
    ) -> tuple[list[Sequence[Any]], Settings]:
        """The context rows (``_CONTEXT_COLUMNS``) build_context needs, root side first,
        and the settings in force above the first of them.

        Two bounded climbs instead of one walk to the root: from the leaf up to
        the nearest compaction, and from there up to its first-kept entry.
        Returned as a *sub-branch* the pure ``build_context`` reads exactly as
        it reads the whole branch, with the settings the compaction recorded
        when it was appended (decisions "context: stop the walk at the
        compaction" and "context: settings on the compaction" in
        docs/decisions.md); a compaction without them (written before they
        were recorded) costs a third climb to the nearest settings changes.
        ``settings=False`` skips that, and ``limit > 0`` stops counting past
        ``limit`` rows (both for :meth:`context_length`).
        """
        columns = tree_sql.context_select_list(cursor.db.vendor)
        tail = self._climb(cursor, session_id, leaf_id, columns, ("type", "compaction"), limit)
        if not tail:
            raise exceptions.NoEntry(f'entry "{leaf_id}" not found in session "{session_id}"')
        top, above_id = tail[-1]
        if top[_C_TYPE] != "compaction" or above_id is None or (limit and len(tail) >= limit):
            # No compaction on the branch (the walk reached the root), a
            # compaction at the root, or the count is already past the bound.
            return [row for row, _ in reversed(tail)], NO_SETTINGS
        first_kept = str(top[_C_FIRST_KEPT])
        kept: list[tuple[Sequence[Any], str | None]] = []
        if first_kept:
            kept = self._climb(
                cursor,
                session_id,
                above_id,
                columns,
                ("entry_id", first_kept),
                limit - len(tail) if limit else 0,
            )
            if limit and len(tail) + len(kept) >= limit:
                # Past the bound: stop counting.
                return [row for row, _ in reversed(tail + kept)], NO_SETTINGS
            if not kept or kept[-1][0][_C_ID] != first_kept:
                # Not an ancestor: the compaction keeps no tail, and this climb
                # read the whole rest of the branch, which holds every setting.
                if not settings:
                    return [row for row, _ in reversed(tail)], NO_SETTINGS
                return [row for row, _ in reversed(tail + kept)], NO_SETTINGS
            above_id = kept[-1][1]
        rows = [row for row, _ in reversed(tail + kept)]
        if not settings:
            return rows, NO_SETTINGS
        recorded = top[_C_SETTINGS]
        if recorded is not None:
            # In force at the compaction's parent: replaying the kept part's
            # own changes over them changes nothing (tree_context.build_context).
            return rows, _decode_settings(recorded)
        if above_id is None:
            return rows, NO_SETTINGS
        return rows, self._settings_at(cursor, session_id, above_id)

    def _settings_at(self, cursor: SqlCursor, session_id: str, entry_id: str) -> Settings:
        """The provider, model and thinking level in force after ``entry_id`` (it included).

        One climb that stops at the nearest model change *and* thinking-level
        change, or at a compaction that recorded the settings above it —
        never further than the previous compaction.
        """
        columns = tree_sql.context_select_list(cursor.db.vendor)
        found = [row for row, _ in self._climb(cursor, session_id, entry_id, columns, None, 0)]
        settings = NO_SETTINGS
        if found and found[-1][_C_TYPE] == "compaction":
            settings = _decode_settings(found.pop()[_C_SETTINGS])
        for row in reversed(found):  # root side first: the nearest change wins
            settings = apply_settings(_ContextEntry(row), settings)
        return settings

    def _climb(
        self,
        cursor: SqlCursor,
        session_id: str,
        entry_id: str,
        columns: str,
        stop: tuple[str, str] | None,
        limit: int,
    ) -> list[tuple[Sequence[Any], str | None]]:
        """``(row, parent_id)`` from ``entry_id`` upwards, leaf side first.

        ``stop = (column, value)``: the climb includes the first row whose
        column has the value and goes no further. ``stop = None``: climb until
        both a model change and a thinking-level change were passed, or a
        compaction that recorded the settings, and return only such rows.
        ``limit > 0`` caps the rows. Like every walk here it is
        iterative (one recursive query) and capped by the session's highest seq
        against a corrupt parent cycle; on PostgreSQL the step is a LATERAL
        lookup (see ``agentstore/sql/tree.py``).
        """
        params: list[Any] = []
        stop_column = ""
        if stop is not None:
            stop_column, value = stop
            params = [value]
        cursor.execute(
            tree_sql.climb(cursor.db.vendor, columns, stop_column, bool(limit)),
            [
                *params,
                session_id,
                entry_id,
                *params,
                session_id,
                limit - 1 if limit else session_id,
            ],
        )
        rows = cursor.fetchall()
        # Level order is what both backends emit, not what SQL promises.
        if any(rows[i][0] > rows[i + 1][0] for i in range(len(rows) - 1)):
            rows.sort(key=lambda row: row[0])
        seen: set[int] = set()
        path: list[tuple[Sequence[Any], str | None]] = []
        for row in rows:
            if row[1] in seen:
                break  # a parent cycle: stop where it closes
            seen.add(row[1])
            path.append((row[3:], row[2]))
        return path

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


# -- walks ---------------------------------------------------------------------------

#: ``(entry_id, parent_id, created_at, seq)``: where an entry sits in the tree.
_Key = tuple[str, str | None, Any, int]
#: Levels climbed one indexed query at a time before one recursive query takes over.
_CLIMB_STEPS = 16


class _TreeWalk:
    """Pre-order steps through a session's forest, each a few indexed queries.

    Siblings are in append order ``(created_at, seq)``, roots are the entries
    without a parent — the forest :meth:`TreeStore.tree` nests, so an entry
    whose parent is not in the session is never reached (as there). Nothing
    recurses in Python: climbing out of a finished subtree is a loop, and past
    ``_CLIMB_STEPS`` levels one recursive SQL query finds the nearest ancestor
    with a later sibling.
    """

    def __init__(self, cursor: SqlCursor, session_id: str) -> None:
        self.cursor = cursor
        self.session_id = session_id
        self.vendor = str(cursor.db.vendor)

    def _one(self, where: str, params: list[Any], order: bool = True) -> _Key | None:
        statement = tree_sql.walk_one(self.vendor, where, order)
        self.cursor.execute(statement, [self.session_id, *params])
        row = self.cursor.fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def key(self, entry_id: str) -> _Key | None:
        return self._one(tree_sql.WALK_KEY, [entry_id], order=False)

    def first_root(self) -> tuple[_Key, int] | None:
        root = self._one(tree_sql.WALK_ROOT, [])
        return None if root is None else (root, 0)

    def _next_sibling(self, key: _Key) -> _Key | None:
        _, parent, created, seq = key
        if parent is None:
            return self._one(tree_sql.WALK_NEXT_ROOT, [created, created, seq])
        return self._one(tree_sql.WALK_NEXT_SIBLING, [parent, created, created, seq])

    def after(self, key: _Key, depth: int) -> tuple[_Key, int] | None:
        """The entry after ``key`` (at ``depth``) in pre-order, with its depth."""
        child = self._one(tree_sql.WALK_CHILD, [key[0]])
        if child is not None:
            return child, depth + 1
        node: _Key | None = key
        for _ in range(_CLIMB_STEPS):
            if node is None:
                return None
            sibling = self._next_sibling(node)
            if sibling is not None:
                return sibling, depth
            if node[1] is None:
                return None  # a root without a later root: the forest is done
            node = self.key(node[1])
            depth -= 1
        return None if node is None else self._climb(node, depth)

    def _climb(self, node: _Key, depth: int) -> tuple[_Key, int] | None:
        """The nearest later sibling of ``node`` or an ancestor, in one recursive query."""
        self.cursor.execute(
            tree_sql.walk_climb(self.vendor),
            [self.session_id, node[0], self.session_id, self.session_id],
        )
        row = self.cursor.fetchone()
        if row is None:
            return None
        return (row[1], row[2], row[3], row[4]), depth - int(row[0])


def _require_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise exceptions.ValidationError(f"{field} must be an integer", field=field)
    return value


# -- row mapping ---------------------------------------------------------------------


# The fields of the value objects a branch read builds, in the order their
# positional builders take them (agentstore.types.frozen: a read of 50 entries
# builds 150 objects, and a keyword call would cost more than their slots).
require_fields(
    EntryEntity,
    (
        "id", "session_id", "type", "created_at", "parent_id", "message", "custom_type",
        "data_json", "summary", "tool_name", "tool_status", "tool_args_json",
        "token_estimate", "model_facing", "display", "compaction_first_kept_entry_id",
        "compaction_tokens_before", "branch_from_entry_id", "operation_id", "seq",
    ),
)  # fmt: skip
require_fields(MessageEntity, ("role", "content", "provider", "model", "parts", "timestamp"))
require_fields(MessagePartEntity, ("type", "text", "mime_type", "name", "data", "width", "height"))
_new_entry = positional_builder(EntryEntity)
_new_message = positional_builder(MessageEntity)
_new_part = positional_builder(MessagePartEntity)


def _entries_from_rows(
    rows: Iterable[Sequence[Any]],
    parts: Mapping[int, list[MessagePartEntity]] | None,
    *,
    text_stamps: bool,
) -> list[EntryEntity]:
    """``EntryEntity`` values of selected entry rows (:func:`tree_sql.select_list`).

    ``parts``: the stored message parts by entry primary key (an entry with a
    message and none gets its content as one text part, :func:`_message_parts`);
    ``None``: no parts at all (an unhydrated read). ``text_stamps``: ``created_at``
    is SQLite's text (naive UTC), parsed here directly; else :func:`sql.utc`.
    One loop with the builders called positionally (in ``require_fields``' order
    above): per-row helper calls were a fifth of a 50-entry branch read.
    """
    new_entry, new_message, new_part = _new_entry, _new_message, _new_part
    parse, utc = datetime.fromisoformat, sql.utc
    out: list[EntryEntity] = []
    append = out.append
    for (
        session_id,
        pk,
        seq,
        entry_id,
        parent_id,
        entry_type,
        line,
        created_at,
        role,
        content,
        provider,
        model,
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
        _part_count,
    ) in rows:
        if text_stamps:
            try:
                stamp = parse(created_at + "+00:00")
            except (TypeError, ValueError):
                stamp = utc(created_at)
        else:
            stamp = utc(created_at)
        found: tuple[MessagePartEntity, ...] = ()
        if role and parts is not None:  # as _message_parts, inlined
            stored = parts.get(pk)
            if stored:
                found = tuple(stored)
            elif content.strip():
                found = (new_part("text", content, "", "", b"", 0, 0),)
        append(
            new_entry(
                entry_id,
                session_id,
                entry_type,
                stamp,
                parent_id,
                new_message(role, content, provider, model, found, stamp),
                custom_type,
                line,
                summary,
                tool_name,
                tool_status,
                tool_args_json,
                token_estimate,
                bool(model_facing),
                bool(display),
                first_kept,
                tokens_before,
                branch_from,
                operation_id,
                seq,
            )
        )
    return out


def _message_parts(
    role: str, content: str, stored: Iterable[MessagePartEntity] | None
) -> tuple[MessagePartEntity, ...]:
    """The parts a reader sees: the stored ones, else the content as one text part."""
    if not role:
        return ()
    found = tuple(stored or ())
    if not found and content.strip():
        # A plain-text message stores no part rows ("legacy text" in librecode).
        return (_new_part("text", content, "", "", b"", 0, 0),)
    return found


class _ContextEntry:
    """A branch row seen through the attributes ``build_context`` reads.

    Building a full ``EntryEntity`` for each of 10,000 entries dominated the
    cost of a context build; this view builds the message only when asked.
    """

    __slots__ = ("parts", "row")

    def __init__(self, row: Sequence[Any]) -> None:
        self.row = row
        self.parts: tuple[MessagePartEntity, ...] = ()

    @property
    def id(self) -> str:
        return str(self.row[_C_ID])

    @property
    def type(self) -> str:
        return str(self.row[_C_TYPE])

    @property
    def model_facing(self) -> bool:
        return bool(self.row[_C_MODEL_FACING])

    @property
    def summary(self) -> str:
        return str(self.row[_C_SUMMARY])

    @property
    def compaction_first_kept_entry_id(self) -> str:
        return str(self.row[_C_FIRST_KEPT])

    @property
    def created_at(self) -> datetime:
        return _to_datetime(self.row[_C_CREATED])

    @property
    def data_json(self) -> str:
        return str(self.row[_C_LINE])

    @property
    def data(self) -> dict[str, Any]:
        value = json.loads(self.row[_C_LINE])
        return value if isinstance(value, dict) else {}

    @property
    def message(self) -> MessageEntity:
        row = self.row
        # Positional, in require_fields' order (role, content, provider, model,
        # parts, timestamp).
        return _new_message(
            row[_C_ROLE],
            row[_C_CONTENT],
            row[_C_PROVIDER],
            row[_C_MODEL],
            self.parts,
            _to_datetime(row[_C_CREATED]),
        )


# A compaction that recorded the settings in force above it: a settings climb stops there.
def _encode_settings(settings: Settings) -> str:
    return json.dumps(list(settings), ensure_ascii=False)


def _decode_settings(value: str) -> Settings:
    provider, model, thinking_level = json.loads(value)
    return str(provider), str(model), str(thinking_level)


def _with_seq(entry: EntryEntity, seq: int) -> EntryEntity:
    return replace(entry, seq=seq)


#: Sets a (frozen, slotted) entity's ``seq`` in place: only for an entity not
#: yet handed to anyone (the append's own, just inserted).
_set_seq: Callable[[EntryEntity, int], None] = vars(EntryEntity)["seq"].__set__


def _part_rows(pk: int, parts: Sequence[MessagePartEntity]) -> list[list[Any]]:
    """The parts' INSERT parameters (``tree_sql.INSERT_PART``) under entry ``pk``."""
    return [
        sql.row(
            MessagePart,
            entry_id=pk,
            sequence=index,
            type=part.type,
            text=part.text,
            mime_type=part.mime_type,
            name=part.name,
            width=part.width,
            height=part.height,
            data=part.data if part.data else None,
        )
        for index, part in enumerate(parts)
    ]


def _message_from_entry(entry: EntryEntity) -> SessionMessageEntity:
    message = entry.message
    return SessionMessageEntity(
        id=entry.id,
        session_id=entry.session_id,
        entry_id=entry.id,
        sender=message_sender(message.role, entry.custom_type),
        role=message.role,
        created_at=entry.created_at,
        content=message.content,
        provider=message.provider,
        model=message.model,
        parts=message.parts,
    )

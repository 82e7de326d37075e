"""OpenAPI links: how one call's answer feeds the next, so sequences are explorable.

An OpenAPI *link* on a response says "this value goes into that operation's
parameter or body" — e.g. a created session's ``id`` into the path of an
append, an appended entry's ``id`` into the next append's ``parent_id``.
Documentation tools draw them, and schemathesis's stateful mode walks them to
test sequences (create → append → compact → context) rather than single calls
(``tests/api/test_schema.py``; docs/api.md, "Python client" shows the same
sequence by hand).

drf-spectacular 0.30 has no ``links`` argument, so :class:`AgentStoreAutoSchema`
(the schema class of every agentstore viewset) adds them to the operations it
builds, from :data:`LINKS`. Keys are operation ids; a test checks that every
link names an operation that exists, so renaming an endpoint cannot leave a
dangling link behind.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

__all__ = ["LINKS", "AgentStoreAutoSchema"]

_SESSION = {"path.id": "$request.path.id"}
_NEW_SESSION = {"path.id": "$response.body#/id"}


def _link(
    operation_id: str,
    description: str,
    parameters: dict[str, str],
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    link: dict[str, Any] = {
        "operationId": operation_id,
        "description": description,
        "parameters": parameters,
    }
    if body is not None:
        # Merged into the body the client builds (parent ids, lease owners).
        link["requestBody"] = body
    return link


#: ``{operation id: {status: {link name: link}}}``.
LINKS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "sessions_create": {
        "201": {
            "AppendRoot": _link(
                "sessions_append_message_create",
                "Start the conversation: a root message (`parent_id` null).",
                _NEW_SESSION,
                {"parent_id": None},
            ),
            "Read": _link("sessions_retrieve", "Read the session.", _NEW_SESSION),
            "Entries": _link("sessions_entries_list", "Its entries by seq.", _NEW_SESSION),
            "Context": _link("sessions_context_retrieve", "What the model sees.", _NEW_SESSION),
            "QueueTask": _link(
                "tasks_create",
                "Queue a task the session owns.",
                {},
                {"owner_session_id": "$response.body#/id"},
            ),
        }
    },
    "sessions_append_message_create": {
        "201": {
            "Reply": _link(
                "sessions_append_message_create",
                "Append the next message under this one.",
                _SESSION,
                {"parent_id": "$response.body#/id"},
            ),
            "Compact": _link(
                "sessions_append_compaction_create",
                "Compact the branch ending here, keeping this entry.",
                _SESSION,
                {"parent_id": "$response.body#/id", "first_kept_entry_id": "$response.body#/id"},
            ),
            "ContextAt": _link(
                "sessions_context_retrieve",
                "What the model sees at this entry.",
                {**_SESSION, "query.entry_id": "$response.body#/id"},
            ),
            "Entry": _link(
                "sessions_entry_retrieve",
                "Read this entry back.",
                {**_SESSION, "path.entry_id": "$response.body#/id"},
            ),
        }
    },
    "sessions_append_compaction_create": {
        "201": {
            "Continue": _link(
                "sessions_append_message_create",
                "Continue the conversation after the compaction.",
                _SESSION,
                {"parent_id": "$response.body#/id"},
            ),
            "ContextAt": _link(
                "sessions_context_retrieve",
                "What the model sees after the compaction.",
                {**_SESSION, "query.entry_id": "$response.body#/id"},
            ),
        }
    },
    "tasks_create": {
        "201": {
            "Claim": _link("tasks_claim_create", "Claim the task.", _NEW_SESSION),
            "Read": _link("tasks_retrieve", "Read the task.", _NEW_SESSION),
        }
    },
    "tasks_claim_create": {
        "200": {
            "Finish": _link(
                "tasks_finish_create",
                "Settle the task under the lease just taken.",
                _SESSION,
                {"lease_owner": "$response.body#/lease_owner"},
            ),
        }
    },
    "log_sessions_create": {
        "201": {
            "AppendLine": _link("log_sessions_entries_create", "Append a line.", _NEW_SESSION),
            "Read": _link("log_sessions_retrieve", "Read the session.", _NEW_SESSION),
        }
    },
}


class AgentStoreAutoSchema(AutoSchema):
    """drf-spectacular's ``AutoSchema`` plus the response links of :data:`LINKS`."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for status, links in LINKS.get(operation.get("operationId", ""), {}).items():
            response = operation.get("responses", {}).get(status)
            if response is not None:
                response["links"] = links
        return operation

"""The OpenAPI schema: valid with no warnings, served, and honoured by every response."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token
from schemathesis import checks

from agentstore.stores import LoopStore, TreeStore
from agentstore.types.loop import RunStep
from agentstore.types.tree import MessageEntity
from tests.api.conftest import API


def test_spectacular_validates_without_warnings(tmp_path: Any) -> None:
    out = io.StringIO()
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--file",
        str(tmp_path / "schema.yml"),
        stdout=out,
        stderr=out,
    )
    text = (tmp_path / "schema.yml").read_text()
    assert "/api/v1/sessions/{id}/append/compaction:" in text
    assert "/api/v1/sessions/{id}/follow:" in text


def test_schema_and_swagger_ui_are_served(client: Any, db: None) -> None:
    schema = client.get(f"{API}/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/sessions" in schema.json()["paths"]
    page = client.get(f"{API}/schema/swagger-ui/")
    assert page.status_code == 200
    # Served from this site (drf-spectacular-sidecar), so the UI works offline.
    body = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in body
    assert "cdn.jsdelivr.net" not in body and "unpkg.com" not in body


@pytest.fixture
def api_schema(db: None) -> Iterator[Any]:
    from project.wsgi import application

    # The test's transaction must outlive each request: do what Django's test
    # client does and keep request signals from closing the connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        loaded = schemathesis.openapi.from_wsgi(f"{API}/schema/?format=json", application)
        # Following never ends by design; its behaviour is tested with a real server.
        yield loaded.exclude(path_regex=r".*/follow$")
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture(params=["user", "staff"])
def fuzz_user(request: Any, django_user_model: Any) -> dict[str, Any]:
    """A user (or staff member) with a tree session (one entry) and a loop session."""
    user = django_user_model.objects.create_user(
        "fuzz", password="pw-fuzz-123", is_staff=request.param == "staff"
    )
    tree = TreeStore().create_session("/fuzz", owner=user)
    entry = TreeStore().append_message(tree.id, None, MessageEntity(role="user", content="hi"))
    from agentstore.stores import SessionStore

    loop = SessionStore().create("loop", owner=user).id
    LoopStore().append(RunStep(session_id=loop, step_type="user", content="hi"))
    token, _ = Token.objects.get_or_create(user=user)
    return {"token": token.key, "tree": tree.id, "loop": loop, "entry": entry.id}


CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]

#: Examples per operation (50+ operations, run as a user and as staff): about a
#: minute in all, well under the 3 minutes CI allows.
EXAMPLES = 25


@pytest.mark.slow
def test_every_response_conforms_to_the_schema(api_schema: Any, fuzz_user: dict[str, Any]) -> None:
    headers = {"Authorization": f"Token {fuzz_user['token']}"}

    def aim(case: Any) -> None:
        # Aim requests at real sessions and entries, so bodies reach the stores
        # instead of all stopping at "no such session".
        params = case.path_parameters or {}
        if "id" in params:
            loop = any(word in case.path for word in ("steps", "grants", "snapshot", "finalize"))
            params["id"] = fuzz_user["loop" if loop else "tree"]
        if "entry_id" in params and case.method.upper() == "GET":
            params["entry_id"] = fuzz_user["entry"]

    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 40
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            aim(case)
            case.call_and_validate(headers=headers, checks=CHECKS)

        run()


# -- stateful: sequences along the schema's links -------------------------------------------

#: The operations the links join (agentstore/api/schema.py): a conversation, a task, a log.
LINKED = [
    "sessions_create",
    "sessions_retrieve",
    "sessions_entries_list",
    "sessions_entry_retrieve",
    "sessions_context_retrieve",
    "sessions_append_message_create",
    "sessions_append_compaction_create",
    "tasks_create",
    "tasks_retrieve",
    "tasks_claim_create",
    "tasks_finish_create",
    "log_sessions_create",
    "log_sessions_entries_create",
    "log_sessions_retrieve",
]
#: Scenarios and steps per scenario: bounded, so the suite's time does not creep.
SCENARIOS = 12
STEPS = 8


def test_every_link_names_an_operation(api_schema: Any) -> None:
    from agentstore.api.schema import LINKS

    ids = {
        result.ok().definition.raw.get("operationId") for result in api_schema.get_all_operations()
    }
    targets = {
        link["operationId"]
        for links in LINKS.values()
        for named in links.values()
        for link in named.values()
    }
    assert set(LINKS) <= ids and targets <= ids
    assert set(LINKS) | targets <= set(LINKED)


def aim_body(case: Any, sessions: set[str]) -> None:
    """Make the openings of a sequence valid more often than the loose schema alone would.

    A sequence only goes on from a 2xx: a tree session needs a ``cwd`` and a
    message a role the tree store knows, which random strings rarely are. Bodies
    are sent as JSON: the API also parses forms (for the browsable API), where a
    nested ``message`` or a ``null`` parent cannot be written, so a form-encoded
    step ends its sequence with a 400 and proves nothing about the links.
    Values the links supply (``parent_id``, ``first_kept_entry_id``, path ids)
    are never touched here.
    """
    if case.media_type:
        case.media_type = "application/json"
    operation = case.operation.definition.raw["operationId"]
    if operation == "sessions_create" and not isinstance(case.body, dict):
        case.body = {}
    body = case.body
    if not isinstance(body, dict):
        return
    if operation == "sessions_create":
        # The linked sequences are a conversation's: the other kinds' appends are
        # a 409 by design (the single-call run covers them).
        body.update(kind="tree", cwd="/fuzz", parent_session="")
        for key in ("name", "model", "system_prompt"):
            body.pop(key, None)
    if operation == "sessions_append_message_create":
        # Parts need real base64 and images bytes: the single-call run tries those.
        body["message"] = {"role": "user", "content": "hi"}
    if operation == "tasks_create":
        body["kind"] = str(body.get("kind") or "fuzz")[:64]
        # A task opening a sequence (not fed by the QueueTask link) is aimed at
        # a session of this run, like the single-call run aims at real ids.
        if body.get("owner_session_id") not in sessions and sessions:
            body["owner_session_id"] = sorted(sessions)[0]
        body["parent_task_id"] = None
    if operation == "log_sessions_create":
        body["header"] = {"cwd": "/fuzz"}
    if operation == "log_sessions_entries_create":
        body["entry"] = {"type": "info", "name": "fuzz"}
    if operation == "sessions_append_compaction_create":
        # The strict input refuses what random text often holds (NUL, lone
        # surrogates); a fresh operation id, so the step is a create, not a replay.
        body["summary"] = "compacted"
        body["operation_id"] = f"op-{uuid.uuid4().hex}"
        body.pop("details", None)


@dataclass
class Call:
    operation: str
    status: int
    session: str
    query: dict[str, Any]
    body: Any


def run_linked(
    api_schema: Any, token: str, operations: list[str], known_sessions: tuple[str, ...] = ()
) -> list[Call]:
    """Walk the schema's links among ``operations``; every response is checked."""
    headers = {"Authorization": f"Token {token}"}
    calls: list[Call] = []
    sessions = set(known_sessions)
    linked = api_schema.include(operation_id=operations)
    # Valid bodies only: a sequence goes on from a 2xx, so an invalid create ends it
    # (invalid input per operation is the single-call test's job, above).
    linked.config.generation.update(modes=["positive"])
    # Only the schema's own links (agentstore/api/schema.py): schemathesis would
    # otherwise infer more from names alone (a created session's id into a
    # compaction with a random parent_id), which dilute the walk and end in 400s.
    linked.config.phases.stateful.inference.algorithms = []
    machine = linked.as_state_machine()

    class Workflow(machine):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": headers}

        def before_call(self, case: Any) -> None:
            aim_body(case, sessions)

        def after_call(self, response: Any, case: Any) -> None:
            operation = case.operation.definition.raw["operationId"]
            body = response.json() if response.status_code < 300 and response.content else None
            session = str((case.path_parameters or {}).get("id", ""))
            query = dict(case.query or {})
            calls.append(Call(operation, response.status_code, session, query, body))
            if operation == "sessions_create" and body is not None:
                sessions.add(body["id"])

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS)

    Workflow.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )
    return calls


def succeeded(calls: list[Call]) -> set[str]:
    return {call.operation for call in calls if 200 <= call.status < 300}


@pytest.mark.slow
@pytest.mark.parametrize("fuzz_user", ["staff"], indirect=True)
def test_linked_sequences_conform_to_the_schema(api_schema: Any, fuzz_user: dict[str, Any]) -> None:
    calls = run_linked(api_schema, fuzz_user["token"], LINKED, (fuzz_user["tree"],))
    # The links were walked: a log line reaches its session only through a created
    # one's id (a random id is a 404). The conversation's links (append, compact,
    # context) have their own run, below, which reaches them whatever the seed.
    assert {
        "sessions_create",
        "tasks_create",
        "log_sessions_create",
        "log_sessions_entries_create",
    } <= succeeded(calls), sorted({(c.operation, c.status) for c in calls})


#: The conversation's links: create → append (root, replies) → compact → context.
CONVERSATION = [
    "sessions_create",
    "sessions_append_message_create",
    "sessions_append_compaction_create",
    "sessions_context_retrieve",
]


@pytest.mark.slow
@pytest.mark.parametrize("fuzz_user", ["user"], indirect=True)
def test_a_conversation_walks_create_append_compact_context(
    api_schema: Any, fuzz_user: dict[str, Any]
) -> None:
    """The Compact link feeds a real entry as ``parent_id`` and ``first_kept_entry_id``.

    A compaction answered 2xx, and the context was read at a compaction's id
    through the ContextAt link: the whole sequence, each id from the previous
    response (agentstore/api/schema.py, ``LINKS``).
    """
    calls = run_linked(api_schema, fuzz_user["token"], CONVERSATION)
    seen = sorted({(c.operation, c.status) for c in calls})
    assert set(CONVERSATION) <= succeeded(calls), seen
    # In order: a compaction answered 2xx, then the same session's context was read
    # (2xx) at that compaction (the ContextAt link) or at the leaf it made.
    compacted: dict[str, set[str]] = {}
    read_after_compaction = []
    for call in calls:
        ok = 200 <= call.status < 300
        if call.operation == "sessions_append_compaction_create" and ok:
            compacted.setdefault(call.session, set()).add(call.body["id"])
        elif call.operation == "sessions_context_retrieve" and ok and call.session in compacted:
            read_after_compaction.append(call.query.get("entry_id"))
    assert read_after_compaction, seen

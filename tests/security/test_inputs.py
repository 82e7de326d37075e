"""Input checked at every door (issue 13, items 6–10): stores, API, import and export.

Each test names the hostile input it sends and what must come back: a refusal in
the one error shape (API), a ``ValidationError`` (stores), a failed import naming
the line (files) — never a 500, never a file written outside ``--out``.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from agentstore.exceptions import RefNameError, ValidationError
from agentstore.formats.agentsession import Session as LogSession
from agentstore.formats.agentsession import dumps
from agentstore.models import Document, Session
from agentstore.stores import DocumentStore, LogStore, LoopStore, TreeStore
from agentstore.types import DocumentEntity, RunStep
from agentstore.types.tree import ImportedEntry, ImportedSession, MessageEntity
from tests.api.conftest import API, assert_error, create_session, token_client

pytestmark = pytest.mark.django_db

#: Names no id, key or ref segment may be: each would climb out of a directory,
#: be cut at NUL by one backend and refused by the other, or be too long.
UNSAFE = ["../../x", "/abs/path", "a/b", "a\\b", "..", ".", "a\x00b", "x" * 256, " "]


def command(*args: str) -> str:
    """Run ``manage.py agentstore ARGS``; return stderr (raises ``CommandError`` on failure)."""
    err = StringIO()
    call_command("agentstore", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


def command_fails(*args: str) -> str:
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("agentstore", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


# -- 6. one validation for ids, keys and ref names ------------------------------------------


@pytest.mark.parametrize("bad", UNSAFE)
def test_every_store_refuses_an_unsafe_id(bad: str) -> None:
    now = timezone.now()
    with pytest.raises(ValidationError):
        TreeStore().import_session(ImportedSession(id=bad, cwd="/w", created_at=now))
    entry = ImportedEntry(
        id=bad, type="message", created_at=now, message=MessageEntity(role="user", content="x")
    )
    with pytest.raises(ValidationError):
        TreeStore().import_session(
            ImportedSession(id="fine-id", cwd="/w", created_at=now, entries=(entry,))
        )
    with pytest.raises(ValidationError):
        LogStore().create({"id": bad})
    with pytest.raises(ValidationError):
        DocumentStore().put(DocumentEntity(namespace="n", key=bad, value_json="{}"))
    with pytest.raises(ValidationError):
        DocumentStore().put(DocumentEntity(namespace=bad, key="k", value_json="{}"))
    with pytest.raises(ValidationError):
        LoopStore().append(RunStep(session_id=bad, step_index=0, step_type="user"))
    assert not Session.objects.exists() and not Document.objects.exists()


@pytest.mark.parametrize("bad", ["a/../b", "a/./b", "a\\b", "a\x00b", "../x"])
def test_ref_names_follow_the_same_rule(bad: str) -> None:
    with pytest.raises(RefNameError):
        LogStore().update_ref(bad, None, None)


def pi_file(session_id: str, *entry_lines: str) -> str:
    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-05-01T10:00:00.000Z",
        "cwd": "/w",
    }
    return "\n".join([json.dumps(header), *entry_lines]) + "\n"


def pi_message(entry_id: str, parent: str | None, content: str = "hello") -> str:
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-05-01T10:00:01.000Z",
            "message": {"role": "user", "content": content},
        }
    )


@pytest.mark.parametrize("bad", ["../../x", "/abs/path", "a\\b", ".."])
def test_import_refuses_an_unsafe_session_id(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(pi_file(bad, pi_message("a1b2c3d4", None)))
    assert "session.id" in command_fails("import", str(path))
    agentsession = tmp_path / "a.jsonl"
    agentsession.write_text(dumps(LogSession.new({"id": bad})))
    assert "header.id" in command_fails("import", str(agentsession))
    assert not Session.objects.exists()


def test_import_refuses_an_unsafe_entry_id(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(pi_file("fine-id", pi_message("../../e", None)))
    assert "entries[0].id" in command_fails("import", str(path))
    assert not Session.objects.exists()


def test_export_never_writes_outside_out(tmp_path: Path) -> None:
    """Rows written around the stores (raw ORM, another program) still cannot escape --out."""
    out = tmp_path / "deep" / "out"
    absolute = tmp_path / "absolute"
    now = timezone.now()
    escaping = ["../../escaped", str(absolute), "..", "sub/dir"]
    for session_id in escaping:
        Session.objects.create(id=session_id, kind="tree", cwd="/w", created_at=now, updated_at=now)
    good = TreeStore().create_session("/w").id

    err = command_fails("export", *escaping, good, "--out", str(out))

    assert err.count("refusing to export") == len(escaping)
    assert "4 of 5 session(s) not exported" not in err  # the summary is the CommandError's
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [Path("deep") / "out" / f"{good}.jsonl"]


def test_api_refuses_an_unsafe_document_key(api: APIClient) -> None:
    sid = create_session(api)["id"]
    for key in ["a%00b", "..", "a%5Cb"]:
        url = f"{API}/sessions/{sid}/documents/{key}"
        assert_error(api.put(url, {"value": 1}, format="json"), 400, "validation_error")
        assert_error(api.get(url), 400, "validation_error")
    assert not Document.objects.exists()


# -- 7. importing refuses what the API refuses -----------------------------------------------


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            '{"type":"custom","id":"b1","parentId":"a1b2c3d4","timestamp":'
            '"2026-05-01T10:00:02.000Z","customType":"x","data":{"n":1e999}}',
            "out of range",
        ),
        (
            '{"type":"custom","id":"b1","parentId":"a1b2c3d4","timestamp":'
            '"2026-05-01T10:00:02.000Z","customType":"x","data":{"n":-1E400}}',
            "out of range",
        ),
        (
            '{"type":"custom","id":"b1","parentId":"a1b2c3d4","timestamp":'
            '"2026-05-01T10:00:02.000Z","customType":"x","data":{"n":NaN}}',
            "NaN",
        ),
        (pi_message("b1", "a1b2c3d4", "nul \x00 here"), "NUL"),
        (pi_message("b1", "a1b2c3d4", "lone \ud800 surrogate"), "surrogate"),
    ],
)
def test_pi_import_refuses_unstorable_json_with_the_line_number(
    tmp_path: Path, line: str, why: str
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(pi_file("pi-session", pi_message("a1b2c3d4", None), line))
    err = command_fails("import", str(path))
    assert "line 3" in err and why in err, err
    assert not Session.objects.exists()


def test_pi_import_refuses_an_unstorable_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = '{"type":"session","version":3,"id":"h","timestamp":"2026-05-01T10:00:00.000Z",'
    path.write_text(header + '"cwd":"/w","n":1e999}\n')
    assert "line 1" in command_fails("import", str(path))
    assert not Session.objects.exists()


def test_pi_import_still_skips_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(pi_file("pi-session", pi_message("a1b2c3d4", None), '{"type":"mess'))
    assert "s.jsonl:3: skipped (not JSON)" in command("import", str(path))


def test_agentsession_import_refuses_nul_with_the_line_number(tmp_path: Path) -> None:
    session = LogSession.new({})
    session.append({"type": "info", "name": "fine"})
    session.append({"type": "info", "name": "nul \x00 name"})
    path = tmp_path / "a.jsonl"
    path.write_text(dumps(session))
    err = command_fails("import", str(path))
    assert "line 3" in err and "NUL" in err, err
    assert not Session.objects.exists()


def test_imported_numbers_read_back_as_json(tmp_path: Path, api: APIClient) -> None:
    """What import accepts, every read endpoint can render (no Infinity in any answer)."""
    path = tmp_path / "s.jsonl"
    big = '{"n":1.7976931348623157e308,"m":-5e-324}'
    custom = (
        '{"type":"custom","id":"b1","parentId":"a1b2c3d4","timestamp":'
        f'"2026-05-01T10:00:02.000Z","customType":"x","data":{big}}}'
    )
    path.write_text(pi_file("pi-numbers", pi_message("a1b2c3d4", None), custom))
    command("import", str(path), "--owner", "alice")
    for tail in ("entries", "tree", "branch"):
        response = api.get(f"{API}/sessions/pi-numbers/{tail}")
        assert response.status_code == 200, (tail, response.content[:300])
        json.loads(response.content)


# -- 8. bodies: size, field count, nesting --------------------------------------------------


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_a_json_body_over_the_size_limit_is_413(api: APIClient) -> None:
    response = api.post(f"{API}/sessions", {"cwd": "/w", "name": "x" * 5000}, format="json")
    assert_error(response, 413, "request_too_large")
    assert not Session.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
@pytest.mark.parametrize("size", [10, 5000])
def test_a_form_body_of_any_size_is_415(api: APIClient, size: int) -> None:
    # JSON only: a form body is refused from its headers, unread (test_bounded_bodies.py).
    body = "cwd=/w&name=" + "x" * size
    response = api.post(f"{API}/sessions", body, content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "unsupported_media_type")
    assert not Session.objects.exists()


@override_settings(DATA_UPLOAD_MAX_NUMBER_FIELDS=10)
def test_too_many_query_fields_is_400(api: APIClient) -> None:
    query = "&".join(f"f{i}=1" for i in range(50))
    assert_error(api.get(f"{API}/sessions?{query}"), 400, "too_many_fields")


@pytest.mark.parametrize("depth", [101, 980, 5000, 100_000])
def test_json_nested_past_the_limit_is_400(api: APIClient, depth: int) -> None:
    sid = create_session(api)["id"]
    value = "[" * depth + "]" * depth
    response = api.put(
        f"{API}/sessions/{sid}/documents/deep",
        '{"value":' + value + "}",
        content_type="application/json",
    )
    error = assert_error(response, 400, "parse_error")
    assert "JSON_MAX_DEPTH" in error["message"] or "deep" in error["message"]


def test_json_within_the_nesting_limit_is_stored(api: APIClient) -> None:
    sid = create_session(api)["id"]
    value: Any = 1
    for _ in range(98):  # plus the body object and "value": 100 levels in all
        value = [value]
    response = api.put(f"{API}/sessions/{sid}/documents/deep", {"value": value}, format="json")
    assert response.status_code == 200, response.content[:300]


@override_settings(AGENTSTORE={"JSON_MAX_DEPTH": 3})
def test_the_nesting_limit_is_a_setting(api: APIClient) -> None:
    sid = create_session(api)["id"]
    url = f"{API}/sessions/{sid}/documents/d"
    assert api.put(url, {"value": [1]}, format="json").status_code == 200
    assert_error(api.put(url, {"value": [[[1]]]}, format="json"), 400, "parse_error")


def test_non_finite_numbers_in_a_body_are_400(api: APIClient) -> None:
    sid = create_session(api)["id"]
    url = f"{API}/sessions/{sid}/documents/n"
    for literal in ("1e999", "-1e999", "NaN", "Infinity"):
        response = api.put(url, '{"value":' + literal + "}", content_type="application/json")
        assert_error(response, 400, "parse_error")
    assert not Document.objects.exists()


# -- 9. unknown paths answer the JSON 404 for every method ------------------------------------


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_unknown_api_path_is_a_json_404_for_every_method(alice: Any, method: str) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    for client in (token_client(alice), browser, APIClient()):
        response = getattr(client, method)(f"{API}/no/such/thing", {"a": 1}, format="json")
        assert_error(response, 404, "not_found")
        assert response["Content-Type"].startswith("application/json")


def test_csrf_is_still_enforced_for_session_authenticated_writes(alice: Any) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    refused = browser.post(f"{API}/sessions", {"cwd": "/w"}, format="json")
    error = assert_error(refused, 403, "permission_denied")
    assert "CSRF" in error["message"]
    assert not Session.objects.exists()
    # With the token a page of the site hands out, the same write goes through.
    browser.get("/admin/login/")
    token = browser.cookies["csrftoken"].value
    accepted = browser.post(f"{API}/sessions", {"cwd": "/w"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201, accepted.content


# -- 10. a NUL in a document key, on both backends -----------------------------------------


def test_a_nul_in_a_document_key_is_refused_on_every_backend(staff_api: APIClient) -> None:
    with pytest.raises(ValidationError):
        DocumentStore().put(DocumentEntity(namespace="n", key="a\x00b", value_json="1"))
    with pytest.raises(ValidationError):
        DocumentStore().get("n", "a\x00b")
    with pytest.raises(ValidationError):
        DocumentStore().delete("n", "a\x00b")
    url = f"{API}/documents/n/a%00b"
    assert_error(staff_api.put(url, {"value": 1}, format="json"), 400, "validation_error")
    assert_error(staff_api.get(url), 400, "validation_error")
    assert_error(staff_api.delete(url), 400, "validation_error")
    assert not Document.objects.exists()

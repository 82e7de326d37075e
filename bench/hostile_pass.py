"""A hostile pass over the REST API as users deploy it: every probe must be refused cleanly.

    .venv/bin/python bench/hostile_pass.py            # a Markdown table; exit 1 on a failure
    .venv/bin/python bench/hostile_pass.py --json     # and the probes as one JSON line
    .venv/bin/python bench/hostile_pass.py --server uvicorn --workers 4 \\
        --postgres postgres://postgres@127.0.0.1:5432/agentstore_hostile   # dropped first

Not a benchmark (nothing is timed; ``bench/run_all.py`` lists it among its helpers): the
re-runnable form of the hostile probe whose findings the API was hardened against. It
makes a fresh SQLite database in a temporary directory, migrates it, creates two non-staff
users with tokens (``alice`` and ``bob``) and serves the demo project with the production
settings (``project.settings_production``: ``DEBUG`` off, a random secret key) under
gunicorn with two ``gthread`` workers of four threads, the deployment docs/operations.md
describes (``--server uvicorn``: ASGI, ``project.asgi``; ``--postgres URL``: that
database, recreated, instead of SQLite). Then it throws requests at the API over raw
sockets (``bench/probe.py``): another user's ids; ``..``, NUL and lone surrogates in ids,
paths, names and bodies; ``1e999``, ``NaN``; bodies over the size limit and deeply nested
ones; multipart, form and other content types and charsets; missing and bad credentials,
a cookie login without CSRF; unknown keys; bad query parameters; races of identical
creates, ref moves, compactions and a delete against appends (8 threads released
together); the follow caps.

Each probe records the request, the expected answer, what came back — status, code, and
whether an error is in the one error shape of docs/api.md — and whether anything was
half-written (every agentstore table's row count before and after; a race checks the exact
rows it should add). A traceback in the server's log fails the pass. About 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.apiclient import API, free_port, start_server  # noqa: E402
from bench.probe import Answer, Checks, Server, changed, counts, read_answer, table  # noqa: E402

#: Threads released together in each race.
RACERS = 8
#: What bob owns that must never show in an answer to alice.
BOB_SECRETS = ("bob-secret-name", "bob-secret-text", "/bob-repo")


def fixtures(srv: Server) -> dict[str, str]:
    """What the probes aim at: each user's sessions of every kind, a task, a workflow, a ref."""
    ids: dict[str, str] = {}

    def made(answer: Answer, status: int) -> Any:
        if answer.status != status:
            raise SystemExit(f"setting up failed: {answer.describe()} {answer.body[:300]!r}")
        return answer.json()

    for who in ("alice", "bob"):
        body = {"cwd": f"/{who}-repo", "name": f"{who}-secret-name"}
        tree = made(srv.send("POST", f"{API}/sessions", body, user=who), 201)["id"]
        message = {"role": "user", "content": f"{who}-secret-text"}
        append = {"parent_id": None, "message": message}
        path = f"{API}/sessions/{tree}/append/message"
        ids[f"{who}_entry"] = made(srv.send("POST", path, append, user=who), 201)["id"]
        loop = {"kind": "loop", "model": "m"}
        ids[f"{who}_loop"] = made(srv.send("POST", f"{API}/sessions", loop, user=who), 201)["id"]
        header = {"header": {"cwd": f"/{who}-repo"}}
        log = made(srv.send("POST", f"{API}/log-sessions", header, user=who), 201)["id"]
        task = {"kind": "job", "owner_session_id": tree}
        ids[f"{who}_task"] = made(srv.send("POST", f"{API}/tasks", task, user=who), 201)["id"]
        run = {"owner_session_id": tree, "name": "wf", "source": "run()", "source_hash": "h"}
        workflow = made(srv.send("POST", f"{API}/workflows", run, user=who), 201)
        ids[f"{who}_workflow"] = workflow["task"]["id"]
        start = {"runner": "weather", "input": f"{who}-secret-text", "session_id": tree}
        ids[f"{who}_run"] = made(srv.send("POST", f"{API}/runs", start, user=who), 201)["id"]
        ref = {"expected": None, "next": {"session": log, "entry": ""}, "reason": "setup"}
        made(srv.send("PUT", f"{API}/refs/{who}/main", ref, user=who), 200)
        doc = f"{API}/sessions/{tree}/documents/note"
        made(srv.send("PUT", doc, {"value": {"secret": f"/{who}-repo"}}, user=who), 200)
        ids[f"{who}_tree"], ids[f"{who}_log"] = tree, log
    return ids


def no_leak(*secret: str) -> Callable[[Answer], str]:
    def check(answer: Answer) -> str:
        text = answer.body.decode("utf-8", "replace")
        leaked = [s for s in secret if s in text]
        return f"LEAKS {leaked}" if leaked else ""

    return check


def same_as(c: Checks, missing_path: str, theirs: str, missing: str) -> Callable[[Answer], str]:
    """Someone else's object must read exactly as a missing one (only the name differs)."""
    reference = c.server.send("GET", API + missing_path).body
    leak = no_leak(*BOB_SECRETS, c.ids["bob_log"])

    def check(answer: Answer) -> str:
        same = answer.body.replace(theirs.encode(), missing.encode()) == reference
        return leak(answer) or ("" if same else "DIFFERS from a missing one's answer")

    return check


def cross_owner(c: Checks) -> None:
    """alice aims at bob's things: 404 as if missing, nothing of bob's said, nothing written."""
    secret = no_leak(*BOB_SECRETS)
    missing = "01900000-0000-7000-8000-000000000000"
    bob = c.ids["bob_tree"]
    like_missing = same_as(c, f"/sessions/{missing}", bob, missing)
    c.expect("other's session", "GET", "/sessions/<bob_tree>", "404 no_session", check=like_missing)
    for sub in ("entries", "tree", "branch", "context", "messages", "transcript", "documents"):
        c.expect(f"other's {sub}", "GET", f"/sessions/<bob_tree>/{sub}", "404 no_session")
    for sub in ("documents/note", "hold", "entries/<bob_entry>"):
        name = f"other's {sub.replace('<bob_entry>', 'entry')}"
        c.expect(name, "GET", f"/sessions/<bob_tree>/{sub}", "404 no_session")
    msg = {"parent_id": None, "message": {"role": "user", "content": "x"}}
    step = {"step_index": 0, "step_type": "user", "content": "x"}
    refused = "404 no_session"
    c.expect("delete other's session", "DELETE", "/sessions/<bob_tree>", refused)
    c.expect("append to other's", "POST", "/sessions/<bob_tree>/append/message", refused, msg)
    c.expect("rename other's", "POST", "/sessions/<bob_tree>/rename", refused, {"name": "mine"})
    c.expect("doc on other's", "PUT", "/sessions/<bob_tree>/documents/n", refused, {"value": 1})
    c.expect("other's steps", "POST", "/sessions/<bob_loop>/steps", refused, step)
    c.expect("other's grants", "POST", "/sessions/<bob_loop>/grants", refused, {"prompt": "rm"})
    c.expect("other's snapshot", "PUT", "/sessions/<bob_loop>/snapshot", refused, {"data": {}})
    c.expect("other's log session", "GET", "/log-sessions/<bob_log>", refused, check=secret)
    c.expect("other's log export", "GET", "/log-sessions/<bob_log>/export", refused, check=secret)
    entry = {"entry": {"type": "info"}}
    c.expect("append to other's log", "POST", "/log-sessions/<bob_log>/entries", refused, entry)
    sse = {"Accept": "text/event-stream"}
    c.expect("follow other's", "GET", "/sessions/<bob_tree>/follow", refused, headers=sse)
    lease = {"lease_owner": "w", "lease_seconds": 30}
    c.expect("other's task", "GET", "/tasks/<bob_task>", "404 no_task")
    c.expect("cancel other's task", "POST", "/tasks/<bob_task>/cancel", "404 no_task", {})
    c.expect("claim other's task", "POST", "/tasks/<bob_task>/claim", "404 no_task", lease)
    c.expect("other's task events", "GET", "/tasks/<bob_task>/events", "404 no_task")
    task = {"kind": "job", "owner_session_id": "<bob_tree>"}
    c.expect("task under other's session", "POST", "/tasks", refused, task)
    sub_task = {"kind": "job", "owner_session_id": "<alice_tree>", "parent_task_id": "<bob_task>"}
    c.expect("subtask of other's task", "POST", "/tasks", "404 no_task", sub_task)
    c.expect("other's run", "GET", "/runs/<bob_run>", "404 no_run", check=secret)
    c.expect("cancel other's run", "POST", "/runs/<bob_run>/cancel", "404 no_run", {})
    run_there = {"runner": "weather", "input": "x", "session_id": "<bob_tree>"}
    c.expect("run on other's session", "POST", "/runs", refused, run_there)
    c.expect("runs of other's session", "GET", "/runs?session=<bob_tree>", refused)
    child = {"cwd": "/x", "parent_session": "<bob_tree>"}
    c.expect("child of other's session", "POST", "/sessions", refused, child)
    c.expect("other's workflow", "GET", "/workflows/<bob_workflow>", "404 no_workflow")
    link = {"agent_task_id": "<alice_task>", "node_key": "n"}
    path = "/workflows/<bob_workflow>/links"
    c.expect("link into other's workflow", "POST", path, "404 no_workflow", link)
    # A ref's name is what the caller sent, so answers may echo "bob/main"; they must not
    # say where bob's ref points, nor differ from a never-used name's.
    like_no_ref = same_as(c, "/refs/nobody/main", "bob/main", "nobody/main")
    c.expect("other's ref", "GET", "/refs/bob/main", "404 no_ref", check=like_no_ref)
    like_no_log = same_as(c, "/ref-log/nobody/main", "bob/main", "nobody/main")
    c.expect("ref log of other's ref", "GET", "/ref-log/bob/main", "200/404", check=like_no_log)
    take = {"expected": None, "next": {"session": "<alice_log>", "entry": ""}}
    ref_leak = no_leak(c.ids["bob_log"], "/bob-repo")
    c.expect("take other's ref name", "PUT", "/refs/bob/main", "400 ref_name", take, check=ref_leak)
    point = {"expected": None, "next": {"session": "<bob_log>", "entry": ""}}
    c.expect("ref at other's log", "PUT", "/refs/alice/x", refused, point)
    staff = "403 permission_denied"
    c.expect("shared documents", "GET", "/documents/session:<bob_tree>/note", staff, check=secret)
    for name, path in [
        ("owner filter cannot widen", "/sessions?owner=bob"),
        ("sessions list", "/sessions?page_size=200"),
        ("refs list", "/refs"),
        ("tasks list", "/tasks"),
        ("runs list", "/runs"),
        ("workflows list", "/workflows"),
        ("log sessions list", "/log-sessions"),
    ]:
        answer = c.server.send("GET", API + path)
        text = answer.body.decode("utf-8", "replace")
        leak = [s for s in (*BOB_SECRETS, bob, c.ids["bob_log"], c.ids["bob_task"]) if s in text]
        got = f"{answer.describe()}, count {(answer.json() or {}).get('count')}"
        got += f", LEAKS {leak}" if leak else ""
        c.add(name, f"GET {path}", "200 without bob's rows", got, answer.status == 200 and not leak)


def literal_key(c: Checks, label: str, raw: bytes) -> None:
    """Path bytes that are not UTF-8 reach no store as such: the server decodes them first.

    Django's WSGI handler turns each byte of a path that does not decode as UTF-8 back into
    its ``%XX`` text (``repercent_broken_unicode``): ``/documents/%ED%A0%80`` names the key
    ``"%ED%A0%80"``, nine ASCII characters. uvicorn decodes the path with
    ``errors="replace"``: the key is U+FFFD characters. Either is a valid name and never a
    lone surrogate; a 200 is right if such a key is what was stored and it reads back.
    """
    from agentstore.models import Document

    text = raw.decode("ascii")
    namespace = f"session:{c.ids['alice_tree']}"
    keys = Document.objects.filter(namespace=namespace).values_list("key", flat=True)
    before = set(keys)
    path = API.encode() + f"/sessions/{c.ids['alice_tree']}/documents/".encode() + raw
    answer = c.server.send("PUT", path, {"value": 1})
    new = set(keys.all()) - before
    back = c.server.send("GET", path)
    decoded = all(k == text or set(k) == {"\ufffd"} for k in new)
    ok = (answer.status in (400, 404) and answer.shaped) or (
        answer.status == 200 and len(new) == 1 and decoded and back.status == 200
    )
    c.add(
        f"document key {label}",
        f"PUT /sessions/<alice_tree>/documents/{text}",
        f"400/404, or 200 storing {text!r} as text (WSGI) or U+FFFD (uvicorn), read back",
        f"{answer.describe()}; key stored: {sorted(new)}; GET back {back.status}",
        ok,
    )
    c.server.send("DELETE", path)


#: Path segments no id may be: (label, the raw bytes sent).
BAD_SEGMENTS = [
    ("..", b".."),
    ("%2e%2e", b"%2e%2e"),
    ("NUL", b"a%00b"),
    ("lone surrogate", b"%ED%A0%80"),
    ("invalid UTF-8", b"%FF"),
    ("%2e%2e%2f", b"%2e%2e%2fx"),
]

#: Lookups by an id in the path, each probed with every one of BAD_SEGMENTS.
LOOKUPS = [
    "/sessions/<alice_tree>/entries/",
    "/sessions/<alice_tree>/documents/",
    "/log-sessions/",
    "/tasks/",
    "/tool-tasks/",
    "/agent-tasks/",
    "/workflows/",
    "/ref-log/alice/",
]

#: JSON bodies carrying poison as JSON escapes: (name, method, path, body text).
POISON_BODIES = [
    ("name: lone surrogate", "POST", "/sessions", r'{"cwd": "/r", "name": "a\ud800b"}'),
    ("cwd: NUL", "POST", "/sessions", r'{"cwd": "/r\u0000x"}'),
    ("kind: lone surrogate", "POST", "/sessions", r'{"kind": "\ud800", "cwd": "/r"}'),
    ("parent_session: ..", "POST", "/sessions", r'{"cwd": "/r", "parent_session": ".."}'),
    ("parent_session: NUL", "POST", "/sessions", r'{"cwd": "/r", "parent_session": "a\u0000"}'),
    (
        "role: lone surrogate",
        "POST",
        "/sessions/<alice_tree>/append/message",
        r'{"parent_id": "<alice_entry>", "message": {"role": "\udfff", "content": "x"}}',
    ),
    (
        "content: lone surrogate",
        "POST",
        "/sessions/<alice_tree>/append/message",
        r'{"parent_id": "<alice_entry>", "message": {"role": "user", "content": "\ud800"}}',
    ),
    (
        "content: NUL",
        "POST",
        "/sessions/<alice_tree>/append/message",
        r'{"parent_id": "<alice_entry>", "message": {"role": "user", "content": "a\u0000"}}',
    ),
    (
        "parent_id: ..",
        "POST",
        "/sessions/<alice_tree>/append/message",
        r'{"parent_id": "..", "message": {"role": "user", "content": "x"}}',
    ),
    (
        "parent_id: NUL",
        "POST",
        "/sessions/<alice_tree>/append/message",
        r'{"parent_id": "a\u0000", "message": {"role": "user", "content": "x"}}',
    ),
    (
        "data key: lone surrogate",
        "POST",
        "/sessions/<alice_tree>/append/custom",
        r'{"parent_id": "<alice_entry>", "custom_type": "t", "data": {"k\ud800": 1}}',
    ),
    (
        "data value: NUL",
        "POST",
        "/sessions/<alice_tree>/append/custom",
        r'{"parent_id": "<alice_entry>", "custom_type": "t", "data": {"k": "\u0000"}}',
    ),
    (
        "document: lone surrogate",
        "PUT",
        "/sessions/<alice_tree>/documents/k",
        r'{"value": ["\udbff"]}',
    ),
    ("log header: lone surrogate", "POST", "/log-sessions", r'{"header": {"cwd": "\ud800"}}'),
    ("log header: client id ..", "POST", "/log-sessions", r'{"header": {"id": ".."}}'),
    (
        "log entry: NUL",
        "POST",
        "/log-sessions/<alice_log>/entries",
        r'{"entry": {"type": "info", "name": "\u0000"}}',
    ),
    (
        "task kind: NUL",
        "POST",
        "/tasks",
        r'{"kind": "a\u0000", "owner_session_id": "<alice_tree>"}',
    ),
    (
        "task payload: lone surrogate",
        "POST",
        "/tasks",
        r'{"kind": "job", "owner_session_id": "<alice_tree>", "payload": {"x": "\ud800"}}',
    ),
    (
        "target_state: lone surrogate",
        "POST",
        "/tasks/<alice_task>/finish",
        r'{"lease_owner": "w", "target_state": "\ud800"}',
    ),
    (
        "step content: lone surrogate",
        "POST",
        "/sessions/<alice_loop>/steps",
        r'{"step_index": 0, "step_type": "user", "content": "\ud800"}',
    ),
    ("grant prompt: NUL", "POST", "/sessions/<alice_loop>/grants", r'{"prompt": "ls\u0000"}'),
    (
        "snapshot key: surrogate",
        "PUT",
        "/sessions/<alice_loop>/snapshot",
        r'{"data": {"\udc00": 1}}',
    ),
    (
        "ref reason: lone surrogate",
        "PUT",
        "/refs/alice/s",
        r'{"expected": null, "next": {"session": "<alice_log>", "entry": ""}, "reason": "\ud800"}',
    ),
    (
        "agent task name: NUL",
        "POST",
        "/agent-tasks",
        r'{"owner_session_id": "<alice_tree>", "agent_name": "a", "prompt": "p", "cwd": "/c", '
        r'"name": "\u0000"}',
    ),
    (
        "agent task cwd: lone surrogate",
        "POST",
        "/agent-tasks",
        r'{"owner_session_id": "<alice_tree>", "agent_name": "a", "prompt": "p", "cwd": "\ud800"}',
    ),
    (
        "link node_key: lone surrogate",
        "POST",
        "/workflows/<alice_workflow>/links",
        r'{"agent_task_id": "<alice_task>", "node_key": "\udfff"}',
    ),
    (
        "transition: lone surrogate",
        "POST",
        "/tasks/<alice_task>/transition",
        r'{"from_states": ["queued"], "target_state": "\ud800", "kind": "k"}',
    ),
]

#: Numbers no JSON answer could carry, or no column holds: (name, path, body text).
NUMBERS = [
    ("1e999", "message", r'"usage": {"input_tokens": 1e999}'),
    ("NaN", "message", r'"usage": {"input_tokens": NaN}'),
    ("Infinity", "message", r'"usage": {"input_tokens": Infinity}'),
    ("2**70", "message", r'"usage": {"input_tokens": 1180591620717411303424}'),
    ("-Infinity in free JSON", "custom", r'"data": {"x": -Infinity}'),
    ("1e999 in free JSON", "custom", r'"data": {"x": 1e999}'),
]


def poison(c: Checks) -> None:
    for label, raw in BAD_SEGMENTS:
        c.expect(f"session id {label}", "GET", b"/sessions/" + raw, "400/404")
        for where in LOOKUPS:
            path = where.encode() + raw
            c.expect(f"{where.split('/')[1]} lookup {label}", "GET", path, "400/404")
        ref = {"expected": None, "next": {"session": "<alice_log>", "entry": ""}}
        c.expect(f"ref name {label}", "PUT", b"/refs/team/" + raw, "400/404", ref)
        if label in ("lone surrogate", "invalid UTF-8"):
            literal_key(c, label, raw)
        else:
            doc = b"/sessions/<alice_tree>/documents/" + raw
            c.expect(f"document key {label}", "PUT", doc, "400/404", {"value": 1})
    ref = {"expected": None, "next": {"session": "<alice_log>", "entry": ""}}
    c.expect("ref name a/../b", "PUT", "/refs/a/../b", "400/404", ref)
    for name, method, path, text in POISON_BODIES:
        c.expect(name, method, path, "400/404", text)
    for name, kind, part in NUMBERS:
        if kind == "message":
            text = r'{"parent_id": "<alice_entry>", "message": {"role": "user", "content": "x"}, '
        else:
            text = r'{"parent_id": "<alice_entry>", "custom_type": "t", '
        path = f"/sessions/<alice_tree>/append/{kind}"
        c.expect(
            f"number {name}", "POST", path, "400 parse_error|validation_error", text + part + "}"
        )
    doc = "/sessions/<alice_tree>/documents/k"
    c.expect("1e999 in a document", "PUT", doc, "400 parse_error", '{"value": 1e999}')
    entry = '{"entry": {"type": "info", "n": NaN}}'
    c.expect(
        "NaN in a log entry", "POST", "/log-sessions/<alice_log>/entries", "400 parse_error", entry
    )


def bodies(c: Checks, limit: int) -> None:
    srv = c.server
    sessions = f"{API}/sessions"
    big = json.dumps({"cwd": "/r", "name": "x" * (limit + 10)}).encode()
    c.expect(f"body of {len(big):,} bytes", "POST", "/sessions", "413 request_too_large", big)
    json_type = {"Content-Type": "application/json"}
    unsent = srv.head("POST", sessions, headers=json_type, length=200_000_000)
    c.call(
        "200 MB announced, unsent",
        "POST /sessions Content-Length: 200000000, no body sent",
        lambda: srv.exchange(unsent),
        "413 request_too_large",
    )
    multipart = {"Content-Type": "multipart/form-data; boundary=xx"}
    upload = srv.head("POST", sessions, headers=multipart, length=200_000_000)
    c.call(
        "multipart 200 MB, unsent",
        "POST /sessions multipart/form-data, Content-Length: 200000000",
        lambda: srv.exchange(upload, b"--xx\r\n"),
        "413/415",
    )
    form = b'--xx\r\nContent-Disposition: form-data; name="cwd"\r\n\r\n/r\r\n--xx--\r\n'
    refused = "415 unsupported_media_type"
    c.expect("multipart body", "POST", "/sessions", refused, form, headers=multipart)
    urlencoded = {"Content-Type": "application/x-www-form-urlencoded"}
    c.expect("form body", "POST", "/sessions", refused, b"cwd=%2Fr", headers=urlencoded)
    c.expect(
        "form, anonymous", "POST", "/sessions", "401/415", b"cwd=x", headers=urlencoded, user=None
    )
    text_plain = {"Content-Type": "text/plain"}
    c.expect("text/plain body", "POST", "/sessions", refused, b'{"cwd": "/r"}', headers=text_plain)
    xml = {"Content-Type": "application/xml"}
    c.expect("xml body", "POST", "/sessions", refused, b"<cwd>/r</cwd>", headers=xml)
    untyped = srv.head("POST", sessions, length=13)
    c.call(
        "no content type",
        "POST /sessions JSON without Content-Type",
        lambda: srv.exchange(untyped, b'{"cwd": "/r"}'),
        refused,
    )
    chunked = srv.head("POST", sessions, headers={**json_type, "Transfer-Encoding": "chunked"})
    c.call(
        "chunked body",
        "POST /sessions Transfer-Encoding: chunked",
        lambda: srv.exchange(chunked, b'd\r\n{"cwd": "/r"}\r\n0\r\n\r\n'),
        "411 length_required",
    )
    # A declared charset is honoured (a text codec only), with every check after decoding.
    utf16 = {"Content-Type": "application/json; charset=utf-16"}
    nan16 = '{"cwd": "/r", "name": NaN}'.encode("utf-16")
    c.expect("UTF-16 body with NaN", "POST", "/sessions", "400 parse_error", nan16, headers=utf16)
    bz2 = {"Content-Type": "application/json; charset=bz2_codec"}  # bytes to bytes: refused
    body = b'{"cwd": "/r"}'
    c.expect("charset=bz2_codec", "POST", "/sessions", "400 parse_error", body, headers=bz2)
    # Django drops a charset it does not know (HttpRequest.encoding stays UTF-8), so such a
    # body is read as UTF-8, as request.POST would be: a valid body is created, not refused.
    unknown = {"Content-Type": "application/json; charset=no-such-charset"}
    answer = c.server.send("POST", f"{API}/sessions", b'{"cwd": "/r-unknown"}', headers=unknown)
    created = answer.status == 201 and (answer.json() or {}).get("cwd") == "/r-unknown"
    c.add(
        "charset=no-such-charset",
        "POST /sessions charset=no-such-charset, UTF-8 body",
        "201 read as UTF-8 (Django ignores unknown charsets), or 400 shaped",
        answer.describe(),
        created or (answer.status == 400 and answer.shaped),
    )
    patch = {"Content-Type": "application/merge-patch+json"}
    c.expect("merge-patch type", "POST", "/sessions", "415", b'{"cwd": "/r"}', headers=patch)
    c.expect("TRACE", "TRACE", "/sessions", "405 method_not_allowed")
    c.expect("invalid JSON", "POST", "/sessions", "400 parse_error", b"{")
    c.expect("invalid UTF-8", "POST", "/sessions", "400 parse_error", b'{"cwd": "\xff"}')
    either = "400 validation_error|parse_error"
    c.expect("top-level array", "POST", "/sessions", either, b"[]")
    c.expect("top-level string", "POST", "/sessions", either, b'"x"')
    c.expect("empty body", "POST", "/sessions", "400", b"")
    path = "/sessions/<alice_tree>/append/custom"
    for depth in (101, 5000, 200_000):
        nested = b'{"a": ' * depth + b"1" + b"}" * depth
        body = b'{"parent_id": "<alice_entry>", "custom_type": "t", '
        body += b'"data": ' + nested + b"}"
        deep = "400/413 parse_error|request_too_large"
        c.expect(f"nested {depth:,} deep", "POST", path, deep, body, note=f"{len(body):,} bytes")
    arrays = b'{"value": ' + b"[" * 150 + b"]" * 150 + b"}"
    doc = "/sessions/<alice_tree>/documents/k"
    c.expect("150 nested arrays", "PUT", doc, "400 parse_error", arrays)

    def names(key: str) -> Callable[[Answer], str]:
        def check(answer: Answer) -> str:
            details = ((answer.json() or {}).get("error") or {}).get("details") or {}
            return "" if key in (details.get("fields") or {}) else f"details.fields lacks {key!r}"

        return check

    bad = "400 validation_error"
    append = "/sessions/<alice_tree>/append/message"
    reply = {"role": "assistant", "content": "x"}
    unknown = {"cwd": "/r", "bogus": 1}
    c.expect("unknown key", "POST", "/sessions", bad, unknown, check=names("bogus"))
    usgae = {"parent_id": "<alice_entry>", "message": reply, "usgae": {}}
    c.expect("unknown key usgae", "POST", append, bad, usgae, check=names("usgae"))
    tone = {"parent_id": "<alice_entry>", "message": {**reply, "tone": "warm"}}
    c.expect("unknown nested key", "POST", append, bad, tone, check=names("message.tone"))
    text_int = {"parent_id": "<alice_entry>", "message": reply, "usage": {"input_tokens": "30"}}
    c.expect("string for an integer", "POST", append, bad, text_int)
    c.expect("number for a string", "POST", "/sessions", bad, {"cwd": 5})
    c.expect("missing parent_id", "POST", append, bad, {"message": reply})
    image = {**reply, "parts": [{"type": "image", "data": "!!!"}]}
    c.expect("bad base64", "POST", append, bad, {"parent_id": "<alice_entry>", "message": image})
    root = {"parent_id": None, "message": reply}
    loop = "/sessions/<alice_loop>/append/message"
    c.expect("wrong session kind", "POST", loop, "409 wrong_session_kind", root)
    tool = {
        "owner_session_id": "<alice_tree>",
        "invocation_id": "i",
        "wrapper_call_id": "w",
        "cwd": "/r",
        "target_name": "t",
        "arguments": {},
        "definition": {},
        "timeout_seconds": 0,
    }
    c.expect("tool timeout 0", "POST", "/tool-tasks", bad, tool)
    agent = {"owner_session_id": "<alice_tree>", "agent_name": "a", "prompt": "p", "cwd": "/c"}
    c.expect("agent depth 2**40", "POST", "/agent-tasks", bad, {**agent, "depth": 2**40})
    link = {"agent_task_id": "<alice_task>", "node_key": "n"}
    c.expect("link a job task", "POST", "/workflows/<alice_workflow>/links", bad, link)
    claim = "/tasks/<alice_task>/claim"
    c.expect("lease 2**63 s", "POST", claim, bad, {"lease_owner": "w", "lease_seconds": 2**63})
    c.expect("lease -1 s", "POST", claim, bad, {"lease_owner": "w", "lease_seconds": -1})


#: Query parameters that must be 400/404, never a 500.
BAD_QUERIES = [
    "/sessions/<alice_tree>/entries?limit=-1",
    "/sessions/<alice_tree>/entries?limit=99999999999999999999999",
    "/sessions/<alice_tree>/entries?after=1e999",
    "/sessions/<alice_tree>/entries?after=NaN",
    "/sessions/<alice_tree>/entries?cursor=%00%ff",
    "/sessions/<alice_tree>/entries?cursor=../../etc",
    "/sessions/<alice_tree>/tree?cursor=%ED%A0%80",
    "/sessions/<alice_tree>/branch?entry_id=%00",
    "/sessions/<alice_tree>/branch?entry_id=..",
    "/sessions/<alice_tree>/context?entry_id=%ED%A0%80",
    "/sessions/<alice_tree>/messages?limit=0",
    "/sessions/<alice_tree>/follow?after=x",
    "/log-sessions/<alice_log>?limit=1001",
    "/log-sessions/<alice_log>?after=-5",
    "/log-sessions/<alice_log>?cursor=x",
    "/tasks/<alice_task>/events?after=1e999",
    "/tasks/<alice_task>/events?limit=-3",
    "/refs?after=%00",
    "/refs?prefix=%ED%A0%80",
    "/refs?limit=201",
    "/ref-log/alice/main?after=x",
    "/sessions?page=0",
    "/sessions?page=99999999999999999999",
    "/tasks?state=%00",
    "/sessions?kind=%00",
]

#: Query parameters that may match nothing (200) or be refused (400), never a 500.
#: ``page_size`` below 1 falls back to the default (DRF's parsing, docs/api.md); a query
#: value that is not UTF-8 arrives as U+FFFD (Django decodes queries with
#: ``errors="replace"``). gunicorn itself refuses a request line over 4,094 bytes (414,
#: before Django), so the long search stays under that.
LOOSE_QUERIES = [
    "/sessions?page_size=-1",
    "/tasks?kind=%ED%A0%80",
    "/sessions?search=%00",
    "/sessions?search=%ED%A0%80",
    "/sessions?cwd=%00",
    "/sessions?search=" + "a" * 3000,
    "/sessions?search=%22%29%20OR%201%3D1%20--",
    "/sessions?search=*%20NEAR%20%22",
]


def queries(c: Checks) -> None:
    for query in BAD_QUERIES:
        headers = {"Accept": "text/event-stream"} if "/follow" in query else None
        c.expect(f"query {query.split('?')[1]}", "GET", query, "400/404", headers=headers)
    for query in LOOSE_QUERIES:
        answer = c.server.send("GET", API + query)
        good = answer.status == 200 or (answer.status == 400 and answer.shaped)
        c.add(
            f"query {query.split('?')[1][:30]}",
            f"GET {query[:70]}",
            "200 or 400",
            answer.describe(),
            good,
        )


def auth(c: Checks) -> None:
    either = "401 not_authenticated|authentication_failed"
    for name, value in [
        ("bad token", "Token " + "0" * 40),
        ("empty token", "Token"),
        ("token with spaces", "Token a b"),
        ("token with an escape", "Token a\\x00b"),
        ("basic auth", "Basic YWxpY2U6eA=="),
    ]:
        c.expect(name, "GET", "/sessions", either, headers={"Authorization": value}, user=None)
    anonymous = "401 not_authenticated"
    c.expect("no credentials", "GET", "/sessions", anonymous, user=None)
    ref = {"expected": None, "next": {"session": "<alice_log>", "entry": ""}}
    msg = {"parent_id": None, "message": {"role": "user", "content": "x"}}
    for method, path, body in [
        ("POST", "/sessions", {"cwd": "/x"}),
        ("POST", "/log-sessions", {"header": {}}),
        ("POST", "/tasks", {"kind": "job", "owner_session_id": "<alice_tree>"}),
        ("POST", "/sessions/<alice_tree>/append/message", msg),
        ("PUT", "/refs/anon/x", ref),
        ("DELETE", "/sessions/<alice_tree>", None),
    ]:
        c.expect(f"anonymous {method}", method, path, anonymous, body, user=None)
    c.expect("anonymous API root", "GET", "/", anonymous, user=None)
    c.expect("anonymous OPTIONS", "OPTIONS", "/sessions", anonymous, user=None)
    c.expect("anonymous, unknown path", "POST", "/nope", "401/404", {"x": 1}, user=None)
    c.expect("unknown path", "GET", "/nope", "404 not_found")
    c.expect("PATCH a session", "PATCH", "/sessions/<alice_tree>", "405 method_not_allowed", {})
    staff = "403 permission_denied"
    claim = {"kind": "job", "lease_owner": "w", "lease_seconds": 30}
    c.expect("claim-next, not staff", "POST", "/tasks/claim-next", staff, claim)
    c.expect("break a hold, not staff", "DELETE", "/sessions/<alice_tree>/hold", staff)


def race(srv: Server, method: str, path: str, body: Any) -> list[Answer]:
    """``RACERS`` identical requests, each on its own connection, released together."""
    barrier = threading.Barrier(RACERS)
    answers: list[Answer] = []
    lock = threading.Lock()

    def run() -> None:
        barrier.wait()
        answer = srv.send(method, path, body)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=run) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def races(c: Checks) -> None:
    srv, ids = c.server, c.ids

    def one(name: str, method: str, path: str, body: Any, want: str, rows: dict[str, int]) -> None:
        winner, loser, *code = want.split()
        before = counts()
        answers = race(srv, method, API + c.fill(path), body)
        diff = changed(before, counts())
        statuses = sorted(a.status for a in answers)
        problems = []
        if statuses != sorted([int(winner)] + [int(loser)] * (RACERS - 1)):
            problems.append("wrong statuses")
        losers = [a for a in answers if a.status == int(loser) >= 400]
        if any(not a.shaped or [a.code] != code for a in losers):
            problems.append("a loser's error is not shaped or coded so")
        if diff != rows:
            problems.append(f"wanted rows {rows}")
        tally = ", ".join(f"{statuses.count(s)}× {s}" for s in sorted(set(statuses)))
        got = f"{tally}; rows {diff}" + ("; " + "; ".join(problems) if problems else "")
        wanted = f"1× {winner}, {RACERS - 1}× {loser} {' '.join(code)}; rows {rows}"
        c.add(name, f"{RACERS} threads: {method} {path}", wanted, got, not problems)

    tree, log = ids["alice_tree"], ids["alice_log"]
    tool = {
        "owner_session_id": tree,
        "invocation_id": "call-race",
        "wrapper_call_id": "wrap",
        "cwd": "/r",
        "target_name": "shell",
        "arguments": {"cmd": "ls"},
        "definition": {"name": "shell"},
        "timeout_seconds": 60,
    }
    task_rows = {"agentstore.Task": 1, "agentstore.ToolTask": 1, "agentstore.TaskEvent": 1}
    one("race: tool task", "POST", "/tool-tasks", tool, "201 200", task_rows)
    agent = {"owner_session_id": tree, "agent_name": "a", "prompt": "p", "cwd": "/c"}
    agent_id = srv.send("POST", f"{API}/agent-tasks", agent).json()["task"]["id"]
    link = {"agent_task_id": agent_id, "node_key": "n", "invocation_index": 0}
    links = "/workflows/<alice_workflow>/links"
    one("race: workflow link", "POST", links, link, "201 200", {"agentstore.WorkflowAgentTask": 1})
    entry = ids["alice_entry"]
    compact = {
        "parent_id": entry,
        "summary": "s",
        "operation_id": "op",
        "first_kept_entry_id": entry,
    }
    compaction = "/sessions/<alice_tree>/append/compaction"
    one("race: compaction", "POST", compaction, compact, "201 200", {"agentstore.Entry": 1})
    grants = "/sessions/<alice_loop>/grants"
    one("race: grant", "POST", grants, {"prompt": "run ls?"}, "201 200", {"agentstore.Grant": 1})
    create = {"expected": None, "next": {"session": log, "entry": ""}, "reason": "race"}
    ref_rows = {"agentstore.Ref": 1, "agentstore.RefLog": 1}
    one("race: ref create", "PUT", "/refs/alice/race", create, "200 409 ref_moved", ref_rows)
    line = {"entry": {"type": "info", "name": "x"}}
    moved = srv.send("POST", f"{API}/log-sessions/{log}/entries", line).json()["id"]
    move = {"expected": create["next"], "next": {"session": log, "entry": moved}}
    one(
        "race: ref move",
        "PUT",
        "/refs/alice/race",
        move,
        "200 409 ref_moved",
        {"agentstore.RefLog": 1},
    )
    # Different operations on one parent: one compaction wins, the rest are told who won.
    forks = []
    barrier = threading.Barrier(RACERS)
    path = API + c.fill(compaction)
    # A fresh parent: the parent above was compacted by the race before.
    reply = {"parent_id": entry, "message": {"role": "assistant", "content": "y"}}
    leaf = srv.send("POST", f"{API}/sessions/{tree}/append/message", reply).json()["id"]
    base = {"parent_id": leaf, "summary": "s", "first_kept_entry_id": leaf}

    def compact_as(n: int) -> None:
        barrier.wait()
        forks.append(srv.send("POST", path, {**base, "operation_id": f"op-{n}"}))

    before = counts()
    threads = [threading.Thread(target=compact_as, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    diff = changed(before, counts())
    statuses = sorted(a.status for a in forks)
    stale = [a for a in forks if a.status == 409]
    ok = statuses == [201] + [409] * (RACERS - 1) and diff == {"agentstore.Entry": 1}
    ok = ok and all(a.shaped and a.code == "stale_compaction_parent" for a in stale)
    tally = ", ".join(f"{statuses.count(s)}× {s}" for s in sorted(set(statuses)))
    c.add(
        "race: compactions, one parent",
        f"{RACERS} threads: POST {compaction}, each its own operation_id",
        f"1× 201, {RACERS - 1}× 409 stale_compaction_parent; rows {{'agentstore.Entry': 1}}",
        f"{tally}; codes {sorted({a.code for a in stale})}; rows {diff}",
        ok,
    )
    delete_vs_appends(c)
    gone = {"agentstore.Session": -1, "agentstore.Grant": -1}
    one("race: delete", "DELETE", "/sessions/<alice_loop>", None, "204 404 no_session", gone)


def delete_vs_appends(c: Checks) -> None:
    """Appends racing a delete of their session: each 201 or 404, and no orphan left."""
    from agentstore.models import Entry, Session

    srv = c.server
    sid = srv.send("POST", f"{API}/sessions", {"cwd": "/doomed"}).json()["id"]
    barrier = threading.Barrier(RACERS)
    answers: list[Answer] = []
    msg = {"parent_id": None, "message": {"role": "user", "content": "x"}}

    def act(n: int) -> None:
        barrier.wait()
        if n == RACERS // 2:
            answers.append(srv.send("DELETE", f"{API}/sessions/{sid}"))
        else:
            answers.append(srv.send("POST", f"{API}/sessions/{sid}/append/message", msg))

    threads = [threading.Thread(target=act, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(a.status for a in answers)
    orphans = Entry.objects.filter(session_id=sid).count()
    alive = Session.objects.filter(pk=sid).exists()
    ok = set(statuses) <= {201, 204, 404} and statuses.count(204) == 1 and not alive
    ok = ok and orphans == 0 and all(a.shaped for a in answers if a.status == 404)
    tally = ", ".join(f"{statuses.count(s)}× {s}" for s in sorted(set(statuses)))
    c.add(
        "race: delete vs appends",
        f"{RACERS - 1} appends and 1 DELETE of one session, together",
        "appends 201 or 404 no_session, delete 204; no entry left without its session",
        f"{tally}; session gone: {not alive}; orphan entries: {orphans}",
        ok,
    )


def csrf(c: Checks) -> None:
    """A browser login (session cookie) writes only with Django's CSRF token."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )

    user = get_user_model().objects.get(username="alice")
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    cookie = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={store.session_key}"}
    answer = c.server.send("GET", f"{API}/sessions", headers=cookie, user=None)
    got = answer.describe() + f", count {(answer.json() or {}).get('count')}"
    c.add(
        "cookie login reads", "GET /sessions [Cookie: sessionid]", "200", got, answer.status == 200
    )
    forged = "403 permission_denied"
    c.expect(
        "cookie write, no CSRF",
        "POST",
        "/sessions",
        forged,
        {"cwd": "/csrf"},
        headers=cookie,
        user=None,
    )
    c.expect(
        "cookie delete, no CSRF",
        "DELETE",
        "/sessions/<alice_tree>",
        forged,
        headers=cookie,
        user=None,
    )


def follow_caps(c: Checks, kind: str, workers: int, threads: int) -> None:
    """More follow streams than the processes allow; ordinary requests must still answer."""
    srv = c.server
    # docs/operations.md: a gthread worker serves half its threads, an ASGI process 16; one
    # user at most FOLLOW_MAX_PER_USER (4) on each process.
    per_process = threads // 2 if kind == "gunicorn" else 16
    cap = workers * min(4, per_process)
    tries = cap + 4
    path = f"{API}/sessions/{c.ids['alice_tree']}/follow"
    head = srv.head(
        "GET", path, headers={"Accept": "text/event-stream", "Connection": "keep-alive"}
    )
    opened: list[socket.socket] = []
    answers: list[Answer] = []
    try:
        for _ in range(tries):
            sock = srv.connect()
            sock.sendall(head)
            answer = read_answer(sock)  # a refusal is read whole, a live stream only its head
            answers.append(answer)
            if answer.status == 200:
                opened.append(sock)  # the stream is live: it keeps its thread
            else:
                sock.close()
        started = time.monotonic()
        ordinary = [srv.send("GET", f"{API}/sessions") for _ in range(2 * workers)]
        waited = time.monotonic() - started
    finally:
        for sock in opened:
            sock.close()
    refused = [a for a in answers if a.status != 200]
    live = len(opened)
    ok = 1 <= live <= cap and all(a.status in (429, 503) for a in refused)
    shape = f"{workers} workers × {threads} threads" if kind == "gunicorn" else f"{workers} workers"
    request = f"{tries} follow streams held open by one user ({kind}, {shape})"
    expected = (
        f"1 to {cap} live ({workers} × min(4 a user, {per_process} a process)), the rest refused"
    )
    got = f"{live} live; refused: {[a.status for a in refused]}"
    c.add("follow caps", request, expected, got, ok)
    codes = ("follow_capacity", "too_many_followers")
    good = [a.shaped and a.code in codes and "retry-after" in a.headers for a in refused]
    kinds = ", ".join(sorted({a.describe() for a in refused}))
    got = f"{sum(good)} of {len(refused)} shaped with Retry-After: {kinds}"
    expected = "503 follow_capacity (or 429), shaped, Retry-After"
    c.add("follow caps: the refusals", "each refused follow", expected, got, all(good))
    statuses = [a.status for a in ordinary]
    fine = all(s == 200 for s in statuses) and waited < 10
    request = f"{len(ordinary)}× GET /sessions while the streams are open"
    c.add("not starved", request, "200 each, within 10 s", f"{statuses} in {waited:.1f} s", fine)


def setup(tmp: Path, postgres: str) -> tuple[str, dict[str, str]]:
    """A fresh migrated database with alice and bob and their tokens: (URL, tokens).

    A SQLite file in ``tmp``, or the PostgreSQL database ``postgres`` names, dropped and
    created again (name one the pass may own).
    """
    url = postgres or f"sqlite:///{tmp / 'hostile.sqlite3'}"
    if postgres:
        from bench.common import ensure_postgres_database

        ensure_postgres_database(postgres, fresh=True)
    os.environ.update(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "project.settings_production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback, no TLS proxy in front
            "DJANGO_DEBUG": "0",
        }
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    tokens = {}
    for name in ("alice", "bob"):
        user = get_user_model().objects.create_user(name, password=secrets.token_urlsafe(12))
        tokens[name] = Token.objects.create(user=user).key
    return url, tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", choices=["gunicorn", "uvicorn"], default="gunicorn")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--postgres", default="", metavar="URL", help="a PostgreSQL database to recreate and use"
    )
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="also print the probes as JSON")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        url, tokens = setup(tmp, args.postgres)
        from django.conf import settings

        log = tmp / "server.log"
        # A follow stream notices a gone client only at its next write: do not wait for it.
        if args.server == "gunicorn":
            extra = ["--error-logfile", str(log), "--graceful-timeout", "5"]
        else:
            extra = ["--timeout-graceful-shutdown", "5"]
        port = free_port()
        # The server's stderr (uvicorn logs there) goes to the log file read at the end.
        saved = os.dup(2)
        with log.open("ab") as log_file:
            os.dup2(log_file.fileno(), 2)
            try:
                server = start_server(
                    args.server, url, port, args.workers, args.threads, tokens["alice"], extra=extra
                )
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        try:
            srv = Server(port, tokens)
            c = Checks(srv, fixtures(srv))
            cross_owner(c)
            poison(c)
            bodies(c, int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440))
            queries(c)
            auth(c)
            csrf(c)
            races(c)
            follow_caps(c, args.server, args.workers, args.threads)
        finally:
            server.terminate()
            server.wait(timeout=60)
        text = log.read_text(errors="replace")
        tracebacks = text.count("Traceback")
        got = f"{tracebacks} traceback(s)"
        c.add(
            "server log", f"{args.server}'s log after the run", "no traceback", got, not tracebacks
        )
        if tracebacks:
            print(text[-4000:], file=sys.stderr)
    failed = [r for r in c.rows if not r.ok]
    print(
        f"hostile pass: {args.server}, {args.workers} workers"
        + (f" (gthread, {args.threads} threads each)" if args.server == "gunicorn" else "")
        + ", "
        f"project.settings_production, {'PostgreSQL' if args.postgres else 'SQLite'}; "
        f"{len(c.rows)} probes, {len(failed)} failed, "
        f"{time.monotonic() - started:.0f} s\n"
    )
    print(table(c.rows))
    if args.json:
        print(json.dumps({"probes": [r.__dict__ for r in c.rows], "failed": len(failed)}))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

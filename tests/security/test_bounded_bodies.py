"""A body the API would refuse is refused before a byte of it is read.

A hostile probe's report: a 200 MB multipart upload was spooled to disk before
the API answered 400 (Django's multipart parser writes uploads past
``FILE_UPLOAD_MAX_MEMORY_SIZE`` to a temporary file, and session
authentication's CSRF check parses the body through ``request.POST``; under
ASGI, Django's handler spools *every* body before routing it). The API now
takes JSON only and checks the headers first (docs/operations.md, "Request
limits"): another media type is 415, a ``Content-Length`` over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` 413, a chunked body 411 — each without reading
the body: through WSGI, through agentstore's ASGI handler, and over real
gunicorn and uvicorn processes.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token

from agentstore.asgi import ASGIHandler
from agentstore.models import Session
from tests.processes import API, serve

BOUNDARY = "XyZ"
#: The start of a multipart body with one file part; the rest is the file's bytes.
MULTIPART_HEAD = (
    f"--{BOUNDARY}\r\n"
    'Content-Disposition: form-data; name="header"; filename="big.bin"\r\n'
    "Content-Type: application/octet-stream\r\n\r\n"
).encode()
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
#: Large enough that Django would spool it to a temporary file (past 2.5 MB).
BIG = 20 * 1024 * 1024


class CountingInput:
    """A WSGI input of ``size`` bytes (a multipart head, then filler) that counts reads."""

    def __init__(self, size: int, head: bytes = MULTIPART_HEAD) -> None:
        self.head, self.size, self.read_bytes = head, size, 0

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.read_bytes
        n = left if n is None or n < 0 else min(n, left)
        start = self.read_bytes
        self.read_bytes += n
        chunk = self.head[start : start + n]
        return chunk + b"x" * (n - len(chunk))

    def readline(self, n: int = -1) -> bytes:
        return self.read(n if n and n > 0 else 65536)


@pytest.fixture
def token(db: None) -> str:
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    return str(Token.objects.create(user=user).key)


@pytest.fixture
def no_spool(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """Uploads spool here, so "no temporary file" is "this directory stays empty"."""
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    yield tmp_path
    assert list(tmp_path.iterdir()) == []


def _post(client: Client, body: CountingInput, **meta: str) -> Any:
    return client.generic("POST", f"{API}/log-sessions", b"", **{"wsgi.input": body, **meta})


@pytest.mark.parametrize(
    ("meta", "status", "code"),
    [
        ({"CONTENT_TYPE": MULTIPART, "CONTENT_LENGTH": str(BIG)}, 415, "unsupported_media_type"),
        (
            {"CONTENT_TYPE": MULTIPART, "HTTP_TRANSFER_ENCODING": "chunked"},
            415,
            "unsupported_media_type",
        ),
        (
            {"CONTENT_TYPE": "application/x-www-form-urlencoded", "CONTENT_LENGTH": "9"},
            415,
            "unsupported_media_type",
        ),
        (
            {"CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(BIG)},
            413,
            "request_too_large",
        ),
        (
            {"CONTENT_TYPE": "application/json", "HTTP_TRANSFER_ENCODING": "chunked"},
            411,
            "length_required",
        ),
    ],
    ids=["multipart", "multipart-chunked", "form", "json-too-large", "json-chunked"],
)
def test_wsgi_refuses_before_reading(
    token: str, no_spool: Path, meta: dict[str, str], status: int, code: str
) -> None:
    body = CountingInput(BIG)
    response = _post(Client(), body, HTTP_AUTHORIZATION=f"Token {token}", **meta)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert body.read_bytes == 0
    assert Session.objects.count() == 0


def test_a_cookie_session_csrf_check_does_not_read_a_multipart_body(
    token: str, no_spool: Path
) -> None:
    # SessionAuthentication's CSRF check reads request.POST: the gate runs first.
    client = Client(enforce_csrf_checks=True)
    client.login(username="alice", password="pw-alice-123")
    body = CountingInput(BIG)
    response = _post(client, body, CONTENT_TYPE=MULTIPART, CONTENT_LENGTH=str(BIG))
    assert response.status_code == 415, response.content
    assert body.read_bytes == 0


def test_a_json_body_within_the_limit_is_read_and_served(token: str) -> None:
    response = Client().post(
        f"{API}/log-sessions",
        {"header": {}},
        content_type="application/json; charset=utf-8",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert response.status_code == 201, response.content
    # A method the view does not serve stays 405, whatever its body.
    wrong = Client().generic(
        "PUT",
        f"{API}/log-sessions",
        b"a=1",
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"


# -- ASGI: agentstore.asgi.ASGIHandler ------------------------------------------------------


def _asgi(headers: list[tuple[bytes, bytes]], chunks: int) -> tuple[int, dict[str, Any], int]:
    """POST /log-sessions through the handler; (status, body, body chunks it received)."""
    received = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        more = received < chunks
        return {"type": "http.request", "body": b"x" * 1024 * 1024, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": f"{API}/log-sessions",
        "raw_path": f"{API}/log-sessions".encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(ASGIHandler()(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), received


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        (
            [(b"content-type", MULTIPART.encode()), (b"content-length", str(BIG).encode())],
            415,
            "unsupported_media_type",
        ),
        (
            [(b"content-type", MULTIPART.encode()), (b"transfer-encoding", b"chunked")],
            415,
            "unsupported_media_type",
        ),
        (
            [(b"content-type", b"application/json"), (b"content-length", str(BIG).encode())],
            413,
            "request_too_large",
        ),
        (
            [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
            411,
            "length_required",
        ),
    ],
    ids=["multipart", "multipart-chunked", "json-too-large", "json-chunked"],
)
def test_asgi_refuses_before_receiving_the_body(
    headers: list[tuple[bytes, bytes]], status: int, code: str
) -> None:
    user = get_user_model().objects.create_user("alice")
    key = Token.objects.create(user=user).key
    auth = (b"authorization", f"Token {key}".encode())
    got, body, received = _asgi([auth, *headers], chunks=BIG // (1024 * 1024))
    assert (got, body["error"]["code"]) == (status, code)
    assert received == 0
    assert Session.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_asgi_passes_everything_else_to_django() -> None:
    user = get_user_model().objects.create_user("alice")
    key = Token.objects.create(user=user).key
    body = json.dumps({"header": {}}).encode()

    async def run() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        calls = 0

        async def receive() -> dict[str, Any]:
            nonlocal calls
            calls += 1
            if calls > 1:  # after the body, the client just stays connected
                await asyncio.get_running_loop().create_future()
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": f"{API}/log-sessions",
            "raw_path": b"",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"testserver"),
                (b"authorization", f"Token {key}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("testserver", 80),
        }
        await ASGIHandler()(scope, receive, send)
        return sent

    sent = asyncio.run(run())
    assert next(m for m in sent if m["type"] == "http.response.start")["status"] == 201
    assert Session.objects.count() == 1


# -- real servers ------------------------------------------------------------------------


def _refused_without_the_body(port: int, key: str, headers: str) -> tuple[int, str]:
    """Send only the headers (and a few bytes) of a huge POST; read the server's answer.

    A server that reads the body before answering would wait for the rest
    (and the read times out); the API answers from the headers alone.
    """
    first = MULTIPART_HEAD
    if "chunked" in headers:  # one well-formed chunk, and never the last one
        first = f"{len(first):x}\r\n".encode() + first + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(
            (
                f"POST {API}/log-sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {key}\r\n{headers}\r\n"
            ).encode()
            + first
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert b"{" in rest, answer
    status = int(head.split()[1])
    text = rest.decode()
    code = json.loads(text[text.index("{") : text.rindex("}") + 1])["error"]["code"]
    return status, code


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gunicorn", "uvicorn"])
def test_real_servers_refuse_a_huge_multipart_upload_unread(
    kind: str, test_database_url: str
) -> None:
    user = get_user_model().objects.create_user("alice")
    key = Token.objects.create(user=user).key
    huge = 200 * 1024 * 1024
    with serve(test_database_url, kind) as port:
        assert _refused_without_the_body(
            port, key, f"Content-Type: {MULTIPART}\r\nContent-Length: {huge}\r\n"
        ) == (415, "unsupported_media_type")
        assert _refused_without_the_body(
            port, key, f"Content-Type: {MULTIPART}\r\nTransfer-Encoding: chunked\r\n"
        ) == (415, "unsupported_media_type")
        assert _refused_without_the_body(
            port, key, f"Content-Type: application/json\r\nContent-Length: {huge}\r\n"
        ) == (413, "request_too_large")
    assert Session.objects.count() == 0

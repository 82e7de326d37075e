"""Raw HTTP probes of the API and the table they make (``bench/hostile_pass.py``'s tools).

    srv = Server(port, {"alice": token_a, "bob": token_b})
    checks = Checks(srv, ids={"bob_tree": "0197…"})
    checks.expect("other's session", "GET", "/sessions/<bob_tree>", "404 no_session")
    print(table(checks.rows))

Requests go out over a plain socket, byte for byte: a path is sent as written (``%00``,
``..`` and non-UTF-8 escapes reach the server unnormalised), a body string is sent as its
text (JSON escapes such as ``\\ud800`` stay escapes), headers are exactly those given.
``<name>`` in a path or body is replaced by ``ids[name]``, so the table shows which object
a probe aimed at rather than its UUID.

An expected answer is written ``"404 no_session"``: the statuses (``400/404``) and
optionally the error codes (``parse_error|validation_error``). :meth:`Checks.expect` also
requires the one error shape of docs/api.md on every 4xx and 5xx —
``{"error": {"code", "message", "details"}}`` served as ``application/json`` — and that
the request wrote nothing: it counts the rows of every agentstore table before and after
(in this process, beside the server: the benchmark has ``django.setup()`` done).
Nothing here is timed.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "Checks", "Probe", "Server", "changed", "counts", "read_answer", "table"]

#: Seconds any one request may take before the probe counts it as a hang.
TIMEOUT = 20.0
API = "/api/v1"


@dataclass
class Answer:
    """What came back: status (0: no answer), headers (lower-case names), body bytes."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    error: str = ""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def code(self) -> str:
        data = self.json()
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            return str(data["error"].get("code", ""))
        return ""

    @property
    def shaped(self) -> bool:
        """Whether the body is exactly the one error shape, served as JSON."""
        if not self.headers.get("content-type", "").startswith("application/json"):
            return False
        data = self.json()
        if not isinstance(data, dict) or set(data) != {"error"}:
            return False
        error = data["error"]
        return (
            isinstance(error, dict)
            and set(error) == {"code", "message", "details"}
            and isinstance(error["code"], str)
            and bool(error["code"])
            and isinstance(error["message"], str)
            and isinstance(error["details"], dict)
        )

    def describe(self) -> str:
        if not self.status:
            return f"no answer ({self.error})"
        if self.status < 400:
            return str(self.status)
        return f"{self.status} {self.code or '(no code)'}" + ("" if self.shaped else ", NOT shaped")


class Server:
    """Where the API listens and the callers' tokens."""

    def __init__(self, port: int, tokens: dict[str, str]) -> None:
        self.port = port
        self.tokens = tokens

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)

    def head(
        self,
        method: str,
        path: bytes | str,
        *,
        user: str | None = "alice",
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> bytes:
        """The request line and headers; ``path`` goes out as given."""
        raw_path = path if isinstance(path, bytes) else path.encode()
        lines = [method.encode() + b" " + raw_path + b" HTTP/1.1"]
        lines.append(f"Host: 127.0.0.1:{self.port}".encode())
        given = {k.lower(): v for k, v in (headers or {}).items()}
        if user is not None and "authorization" not in given:
            given["authorization"] = f"Token {self.tokens[user]}"
        if length is not None and "content-length" not in given:
            given["content-length"] = str(length)
        given.setdefault("connection", "close")
        lines += [f"{k}: {v}".encode() for k, v in given.items()]
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def send(
        self,
        method: str,
        path: bytes | str,
        body: Any = None,
        *,
        user: str | None = "alice",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One request on its own connection; ``body``: bytes or text as is, else JSON."""
        hdrs = dict(headers or {})
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode("utf-8", "surrogatepass")
        else:
            data = json.dumps(body).encode()  # ensure_ascii: NUL, surrogates go out escaped
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        length = None if data is None else len(data)
        return self.exchange(self.head(method, path, user=user, headers=hdrs, length=length), data)

    def exchange(self, head: bytes, body: bytes | None = b"") -> Answer:
        """Send ``head`` and ``body`` (as far as the server reads it); read the answer."""
        try:
            sock = self.connect()
        except OSError as exc:
            return Answer(0, error=repr(exc))
        try:
            sock.sendall(head)
            try:
                if body:
                    sock.sendall(body)
            except OSError:
                pass  # the server answered and closed before reading it: read the answer
            return read_answer(sock)
        finally:
            sock.close()


def read_answer(sock: socket.socket) -> Answer:
    """The answer on ``sock``; of a live event stream only the head (it never ends by itself)."""
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
        headers = {k.lower(): v for k, v in response.getheaders()}
        stream = headers.get("content-type", "").startswith("text/event-stream")
        body = b"" if stream else response.read()
    except (OSError, http.client.HTTPException) as exc:
        return Answer(0, error=repr(exc))
    return Answer(response.status, headers, body)


def counts() -> dict[str, int]:
    """Rows of every agentstore table."""
    from django.apps import apps

    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_app_config("agentstore").get_models()
    }


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The tables whose row count moved, and by how much."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k)}


@dataclass
class Probe:
    name: str
    request: str
    expected: str
    got: str
    ok: bool


class Checks:
    """Sends the probes and keeps their rows."""

    def __init__(self, server: Server, ids: dict[str, str]) -> None:
        self.server = server
        self.ids = ids
        self.rows: list[Probe] = []

    def fill(self, text: str) -> str:
        """``text`` with each ``<name>`` replaced by ``ids[name]``."""
        return re.sub(r"<(\w+)>", lambda m: self.ids.get(m.group(1), m.group(0)), text)

    def add(self, name: str, request: str, expected: str, got: str, ok: bool) -> None:
        self.rows.append(Probe(name, request, expected, got, ok))

    def expect(
        self,
        name: str,
        method: str,
        path: str | bytes,
        want: str,
        body: Any = None,
        *,
        user: str | None = "alice",
        headers: dict[str, str] | None = None,
        check: Callable[[Answer], str] | None = None,
        note: str = "",
    ) -> Answer:
        """Send a request that must be refused as ``want`` says, shaped, writing nothing.

        ``check`` returns "" when the answer is right in every other respect, or what
        is wrong with it (a leak, say).
        """
        if isinstance(path, bytes):
            shown = path.decode("latin-1")
            sent_path = API.encode() + self.fill(shown).encode("latin-1")
        else:
            shown, sent_path = path, API + self.fill(path)
        if isinstance(body, str):
            shown_body, body = body, self.fill(body)
        elif isinstance(body, dict | list):
            shown_body = json.dumps(body)
            body = self.fill(shown_body)
        elif isinstance(body, bytes):
            shown_body = repr(body[:60])
            body = self.fill(body.decode("latin-1")).encode("latin-1")
        else:
            shown_body = ""
        request = f"{method} {shown}" + (f" {shown_body[:80]}" if shown_body else "")
        if headers:
            shown_headers = {
                k: v.split("=")[0] + "=…" if k == "Cookie" else v[:50] for k, v in headers.items()
            }
            request += " [" + "; ".join(f"{k}: {v}" for k, v in shown_headers.items()) + "]"
        return self.call(
            name,
            request + (f" ({note})" if note else ""),
            lambda: self.server.send(method, sent_path, body, user=user, headers=headers),
            want,
            check=check,
        )

    def call(
        self,
        name: str,
        request: str,
        send: Callable[[], Answer],
        want: str,
        *,
        check: Callable[[Answer], str] | None = None,
    ) -> Answer:
        """Like :meth:`expect` for a request made by ``send`` (raw heads, chunked bodies)."""
        statuses_text, _, codes_text = want.partition(" ")
        statuses = {int(s) for s in statuses_text.split("/")}
        codes = set(codes_text.split("|")) if codes_text else set()
        before = counts()
        answer = send()
        diff = changed(before, counts())
        problems = []
        if answer.status not in statuses:
            problems.append("wrong status")
        if answer.status >= 400 and not answer.shaped:
            problems.append("not the error shape")
        if codes and answer.code not in codes:
            problems.append("wrong code")
        if diff:
            problems.append(f"WROTE {diff}")
        if check and answer.status:
            problem = check(answer)
            if problem:
                problems.append(problem)
        got = answer.describe() + ("; " + "; ".join(problems) if problems else "")
        self.add(name, request, want.replace("|", " or ") + ", shaped, no write", got, not problems)
        return answer


def table(rows: list[Probe]) -> str:
    """The probes as a Markdown table."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")

    out = ["| probe | request | expected | got | ok? |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        verdict = "ok" if r.ok else "**FAIL**"
        cells = [cell(r.name), f"`{cell(r.request)}`", cell(r.expected), cell(r.got), verdict]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)

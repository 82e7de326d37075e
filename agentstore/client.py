"""A small typed Python client for the agentstore REST API (standard library only).

    from agentstore.client import Client, NotFound

    api = Client("http://127.0.0.1:8000/api/v1", token="…")
    session = api.create_session(cwd="/repo")
    hello = api.append_message(session["id"], None, {"role": "user", "content": "hi"})
    reply = api.append_message(session["id"], hello["id"], {"role": "assistant", "content": "yo"})
    api.context(session["id"])["messages"]            # what the model sees at the leaf
    for event in api.follow(session["id"]):            # Server-Sent Events, resumable
        print(event.id, event.event, event.data)

It is a client author's test of the API contract (docs/api.md, "Python client"):
every call is one HTTP request (or a short walk over ``next`` links) with a
timeout, it speaks only what the OpenAPI schema documents, and every refusal
raises :class:`ApiError` — a subclass per HTTP status (:class:`NotFound`,
:class:`Conflict`, …) — built from the API's one error shape::

    {"error": {"code": "...", "message": "...", "details": {...}}}

so callers branch on the exception class or on ``code`` and read
``details`` generically (``details.fields`` for validation errors, ``details.task``
for a task conflict, ``details.current`` for a moved ref).

Appends always send ``parent_id`` explicitly (``None`` starts a root on
purpose): a missing parent would silently start a new root and hide the
conversation from the default context. Responses are plain JSON objects, typed
as ``TypedDict``\\ s for the fields a caller relies on; fields the server adds
later pass through untouched. Only the standard library is used (``urllib``),
so the client runs anywhere the app's wheel installs, without Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast
from urllib.error import HTTPError
from urllib.parse import quote, urlencode, urljoin
from urllib.request import Request, urlopen

__all__ = [
    "ApiError",
    "BadRequest",
    "Client",
    "Conflict",
    "ContextData",
    "EntryData",
    "Forbidden",
    "FollowEvent",
    "GrantData",
    "Locked",
    "NotFound",
    "RefData",
    "RefTargetData",
    "ServerError",
    "SessionData",
    "StepData",
    "TaskData",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
]


# -- errors -------------------------------------------------------------------------


class ApiError(Exception):
    """The API refused a request: its status and the one error shape (code, message, details)."""

    def __init__(self, status: int, code: str, message: str, details: Mapping[str, Any]) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = dict(details)


class BadRequest(ApiError):
    """400: bad input; ``details`` names the field(s)."""


class Unauthorized(ApiError):
    """401: no or bad credentials."""


class Forbidden(ApiError):
    """403: not allowed (staff only)."""


class NotFound(ApiError):
    """404: no such resource, or not yours (the API does not tell them apart)."""


class Conflict(ApiError):
    """409: conflict with the current state; ``details`` says what won."""


class Locked(ApiError):
    """423: the session is held by another writer."""


class TooManyRequests(ApiError):
    """429: e.g. too many live followers for you on that server process."""


class Unavailable(ApiError):
    """503: busy (the database writer queue, follower capacity); retry."""


class ServerError(ApiError):
    """Any other status ≥ 500."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    423: Locked,
    429: TooManyRequests,
    503: Unavailable,
}


def error_from(status: int, body: bytes) -> ApiError:
    """The typed exception of an error response (a body not in the error shape is kept as text)."""
    code, message = f"http_{status}", body.decode("utf-8", "replace")[:500]
    details: Mapping[str, Any] = {}
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        pass
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, code, message, details)


# -- shapes -------------------------------------------------------------------------
# ``total=False``: a caller reads what it needs; the schema (GET /schema/) is the
# full description, and fields added later pass through.


class SessionData(TypedDict, total=False):
    id: str
    kind: str
    cwd: str
    name: str
    parent_session: str | None
    created_at: str
    updated_at: str


class MessageData(TypedDict, total=False):
    role: str
    content: str


class EntryData(TypedDict, total=False):
    id: str
    seq: int
    session_id: str
    parent_id: str | None
    type: str
    created_at: str
    message: MessageData | None
    summary: str


class ContextData(TypedDict, total=False):
    messages: list[MessageData]
    provider: str
    model: str
    thinking_level: str


class StepData(TypedDict, total=False):
    step_index: int
    step_type: str
    content: str
    tool_args: Any
    created_at: str


class GrantData(TypedDict, total=False):
    prompt: str
    granted_at: str


class TaskData(TypedDict, total=False):
    id: str
    kind: str
    state: str
    owner_session_id: str | None
    lease_owner: str | None
    result: str


class RefTargetData(TypedDict, total=False):
    session: str
    entry: str


class RefData(TypedDict, total=False):
    name: str
    target: RefTargetData
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class FollowEvent:
    """One Server-Sent Event of ``/sessions/{id}/follow``.

    ``event`` is ``entry`` / ``step`` / ``line`` / ``checkpoint`` (by session
    kind), ``deleted`` or ``reconnect``; ``id`` is the position to resume after
    (``""`` when the event carries none); ``data`` is the decoded JSON.
    """

    id: str
    event: str
    data: Any


# -- the client ----------------------------------------------------------------------

Json = dict[str, Any]


class Client:
    """The agentstore API at ``base_url`` (e.g. ``http://host/api/v1``), as one user.

    ``token`` is a DRF token (``Authorization: Token …``); ``timeout`` bounds
    every request (seconds; a follow stream's reads wait at least
    :attr:`FOLLOW_READ_TIMEOUT`, longer than the server's keep-alive interval).
    """

    #: Seconds a follow stream may stay silent; the server sends a keep-alive every 15 s.
    FOLLOW_READ_TIMEOUT = 60.0

    def __init__(self, base_url: str, token: str = "", *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.token = token
        self.timeout = timeout

    # -- HTTP --------------------------------------------------------------------

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        url = urljoin(self.base_url, path.lstrip("/"))
        params = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{url}?{urlencode(params)}" if params else url

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json", **(extra or {})}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
    ) -> Any:
        """One request; the decoded JSON answer (``None`` for 204), or a typed :class:`ApiError`."""
        url = path if "://" in path else self.url(path, query)
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers({"Content-Type": "application/json"} if data is not None else None)
        req = Request(url, data=data, method=method, headers=headers)  # noqa: S310 (http(s) URL of the caller's choosing)
        try:
            with urlopen(req, timeout=self.timeout) as response:  # noqa: S310
                raw = response.read()
        except HTTPError as exc:
            raise error_from(exc.code, exc.read()) from None
        return json.loads(raw) if raw else None

    def get(self, path: str, query: Mapping[str, Any] | None = None) -> Any:
        """``GET path`` (``query`` without its ``None`` values); the decoded answer."""
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any) -> Any:
        """``POST path`` with the JSON ``body``; the decoded answer."""
        return self.request("POST", path, body)

    def _pages(self, path: str, query: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a list, page after page through its ``next`` links."""
        found = self.get(path, query)
        while True:
            if isinstance(found, list):  # a bare array: one page
                yield from found
                return
            yield from found.get("results", [])
            if not found.get("next"):
                return
            found = self.get(found["next"])

    # -- sessions ----------------------------------------------------------------

    def create_session(
        self,
        *,
        kind: Literal["tree", "loop"] = "tree",
        cwd: str = "",
        name: str = "",
        **fields: Any,
    ) -> SessionData:
        body = {"kind": kind, "cwd": cwd, "name": name, **fields}
        return cast(SessionData, self.post("sessions", body))

    def session(self, session_id: str) -> SessionData:
        return cast(SessionData, self.get(_session(session_id)))

    def sessions(self, **filters: Any) -> Iterator[SessionData]:
        """Sessions you can see, newest first (``kind=``, ``cwd=``, ``search=`` … filter)."""
        return cast(Iterator[SessionData], self._pages("sessions", filters))

    def delete_session(self, session_id: str) -> None:
        self.request("DELETE", _session(session_id))

    # -- tree entries ------------------------------------------------------------

    def append(self, session_id: str, kind: str, parent_id: str | None, **fields: Any) -> EntryData:
        """``POST /sessions/{id}/append/{kind}`` with an explicit ``parent_id`` (None: a root)."""
        body = {"parent_id": parent_id, **fields}
        path = f"{_session(session_id)}/append/{kind}"
        return cast(EntryData, self.post(path, body))

    def append_message(
        self,
        session_id: str,
        parent_id: str | None,
        message: MessageData | Mapping[str, Any],
        **fields: Any,
    ) -> EntryData:
        """Append a message under ``parent_id`` (``model_facing=``, ``display=``, ``usage=``)."""
        return self.append(session_id, "message", parent_id, message=dict(message), **fields)

    def append_compaction(
        self,
        session_id: str,
        parent_id: str | None,
        summary: str,
        operation_id: str,
        *,
        first_kept_entry_id: str = "",
        tokens_before: int = 0,
        **fields: Any,
    ) -> EntryData:
        """Append a compaction; replaying ``operation_id`` returns the stored entry."""
        return self.append(
            session_id,
            "compaction",
            parent_id,
            summary=summary,
            operation_id=operation_id,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            **fields,
        )

    def entries(self, session_id: str, *, after: int = 0, limit: int = 100) -> Iterator[EntryData]:
        """Entries with ``seq > after`` in append order, ``limit`` a page."""
        path = f"{_session(session_id)}/entries"
        return cast(Iterator[EntryData], self._pages(path, {"after": after, "limit": limit}))

    def entry(self, session_id: str, entry_id: str) -> EntryData:
        path = f"{_session(session_id)}/entries/{_seg(entry_id)}"
        return cast(EntryData, self.get(path))

    def context(self, session_id: str, entry_id: str = "") -> ContextData:
        """What the model sees at ``entry_id`` (default: the most recent leaf)."""
        path = f"{_session(session_id)}/context"
        return cast(ContextData, self.get(path, {"entry_id": entry_id or None}))

    # -- loop steps --------------------------------------------------------------

    def append_step(
        self, session_id: str, step_type: str, content: str = "", **fields: Any
    ) -> StepData:
        """Append a step (``step_index=``, ``tool_args=`` any JSON, token counts …)."""
        body = {"step_type": step_type, "content": content, **fields}
        return cast(StepData, self.post(f"{_session(session_id)}/steps", body))

    def steps(self, session_id: str) -> Iterator[StepData]:
        return cast(Iterator[StepData], self._pages(f"{_session(session_id)}/steps"))

    def last_steps(self, session_id: str, n: int = 50) -> list[StepData]:
        """The newest ``n`` steps, oldest first (one bounded request)."""
        found = self.get(f"{_session(session_id)}/steps/last", {"n": n})
        # A bare array today; an envelope's ``results`` reads the same.
        return cast(list[StepData], found["results"] if isinstance(found, dict) else found)

    # -- loop approvals (grants) ------------------------------------------------------

    def grant(self, session_id: str, prompt: str) -> GrantData:
        """Approve ``prompt`` (201); approving it again answers 200 with the stored grant."""
        path = f"sessions/{_seg(session_id)}/grants"
        return cast(GrantData, self.request("POST", path, {"prompt": prompt}))

    def grants(self, session_id: str) -> Iterator[GrantData]:
        """The session's approvals, oldest grant first."""
        return cast(Iterator[GrantData], self._pages(f"sessions/{_seg(session_id)}/grants"))

    def is_granted(self, session_id: str, prompt: str) -> bool:
        """Was exactly this ``prompt`` approved in the session?"""
        path = f"sessions/{_seg(session_id)}/grants/check"
        return bool(self.request("POST", path, {"prompt": prompt})["granted"])

    def revoke_grants(self, session_id: str) -> int:
        """Forget every approval of the session; how many there were."""
        path = f"sessions/{_seg(session_id)}/grants"
        return int(self.request("DELETE", path)["revoked"])

    # -- log sessions (agentsession lines) -----------------------------------------

    def create_log_session(self, header: Mapping[str, Any]) -> Json:
        return cast(Json, self.post("log-sessions", {"header": dict(header)}))

    def log_session(
        self, session_id: str, *, after: int | None = None, limit: int | None = None
    ) -> Json:
        """Header, leaf and one page of entries of a log session (``next``, ``last_seq``)."""
        query = {"after": after, "limit": limit}
        return cast(Json, self.get(f"log-sessions/{_seg(session_id)}", query))

    def log_entries(self, session_id: str, *, after: int = 0) -> Iterator[Json]:
        """Every entry of a log session after position ``after``, page after page."""
        found = self.log_session(session_id, after=after)
        while True:
            yield from found["entries"]
            if not found.get("next"):
                return
            found = self.get(found["next"])

    def append_line(self, session_id: str, entry: Mapping[str, Any]) -> str:
        """Append one entry line; its content-addressed id (``sha256:…``)."""
        path = f"log-sessions/{_seg(session_id)}/entries"
        return str(self.post(path, {"entry": dict(entry)})["id"])

    # -- tasks --------------------------------------------------------------------

    def create_task(self, kind: str, owner_session_id: str, **fields: Any) -> TaskData:
        """Queue a task owned by one of your sessions (``concurrency_key=``, …)."""
        body = {"kind": kind, "owner_session_id": owner_session_id, **fields}
        return cast(TaskData, self.post("tasks", body))

    def task(self, task_id: str) -> TaskData:
        return cast(TaskData, self.get(f"tasks/{_seg(task_id)}"))

    def claim_task(
        self, task_id: str, lease_owner: str, lease_seconds: int, **fields: Any
    ) -> TaskData:
        """Claim a queued task under a lease (409 :class:`Conflict` when it is not claimable)."""
        body = {"lease_owner": lease_owner, "lease_seconds": lease_seconds, **fields}
        return cast(TaskData, self.post(f"tasks/{_seg(task_id)}/claim", body))

    def finish_task(
        self,
        task_id: str,
        lease_owner: str,
        target_state: Literal["succeeded", "failed", "canceled", "interrupted"],
        *,
        result: str = "",
        event_kind: str | None = None,
        **fields: Any,
    ) -> TaskData:
        """Settle a task you hold; ``event_kind`` defaults to ``task_<target_state>``."""
        body = {
            "lease_owner": lease_owner,
            "target_state": target_state,
            "event_kind": event_kind or f"task_{target_state}",
            "result": result,
            **fields,
        }
        return cast(TaskData, self.post(f"tasks/{_seg(task_id)}/finish", body))

    def task_events(self, task_id: str) -> Iterator[Json]:
        return cast(Iterator[Json], self._pages(f"tasks/{_seg(task_id)}/events"))

    # -- refs ---------------------------------------------------------------------

    def ref(self, name: str) -> RefTargetData:
        """What the ref names (404 :class:`NotFound` when missing, dangling or not yours)."""
        return cast(RefTargetData, self.get(f"refs/{_seg(name, '/')}"))

    def refs(self, prefix: str = "") -> Iterator[RefData]:
        return cast(Iterator[RefData], self._pages("refs", {"prefix": prefix or None}))

    def update_ref(
        self,
        name: str,
        expected: RefTargetData | Mapping[str, str] | None,
        next: RefTargetData | Mapping[str, str] | None,  # noqa: A002 (the API's field name)
        reason: str = "",
    ) -> Any:
        """Compare-and-swap: 409 :class:`Conflict` (``details.current``) when the ref moved."""
        body = {
            "expected": None if expected is None else dict(expected),
            "next": None if next is None else dict(next),
            "reason": reason,
        }
        return self.request("PUT", f"refs/{_seg(name, '/')}", body)

    # -- follow -------------------------------------------------------------------

    def follow(
        self, session_id: str, *, after: int = 0, reconnect: bool = True
    ) -> Iterator[FollowEvent]:
        """Server-Sent Events of what is appended to the session (any kind), oldest first.

        Starts after position ``after``. On ``reconnect`` (the server's
        ``FOLLOW_MAX_SECONDS``) it reconnects with ``Last-Event-ID`` when
        ``reconnect`` is true, so the iterator never misses or repeats an item;
        it ends after ``deleted``. Errors before the stream starts (404, 429,
        …) raise like every other call. Close it (``.close()`` or leaving a
        ``for`` loop) to hang up.
        """
        last = str(after)
        while True:
            ended = True
            for event in self._stream(session_id, last):
                if event.id:
                    last = event.id
                if event.event == "reconnect":
                    ended = not reconnect
                    if not reconnect:
                        yield event
                    break
                yield event
                if event.event == "deleted":
                    break
            if ended:
                return

    def _stream(self, session_id: str, last_event_id: str) -> Iterator[FollowEvent]:
        headers = self._headers({"Accept": "text/event-stream", "Last-Event-ID": last_event_id})
        req = Request(self.url(f"{_session(session_id)}/follow"), headers=headers)  # noqa: S310
        try:
            response = urlopen(req, timeout=max(self.timeout, self.FOLLOW_READ_TIMEOUT))  # noqa: S310
        except HTTPError as exc:
            raise error_from(exc.code, exc.read()) from None
        with response:
            fields: dict[str, str] = {}
            data: list[str] = []
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line:
                    if not line.startswith(":"):  # ``:`` lines are comments (keep-alives)
                        name, _, value = line.partition(":")
                        value = value.removeprefix(" ")
                        if name == "data":
                            data.append(value)
                        else:
                            fields[name] = value
                    continue
                if data:
                    yield FollowEvent(
                        fields.get("id", ""),
                        fields.get("event", "message"),
                        json.loads("\n".join(data)),
                    )
                fields, data = {}, []


def _session(session_id: str) -> str:
    """``sessions/<id>``: the path every per-session call starts from."""
    return f"sessions/{_seg(session_id)}"


def _seg(value: str, safe: str = "") -> str:
    """A URL path segment (``safe="/"`` for ref names, which the URL takes as a path)."""
    return quote(value, safe=safe)

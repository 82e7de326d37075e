"""Pagination: page numbers for collections, ``seq`` cursors for append-only logs.

Every collection (``/sessions``, ``/tasks``, ``/tool-tasks``, ``/agent-tasks``,
``/workflows``, ``/log-sessions``, ``/refs``, ``/ref-log/{name}``,
``/documents``) answers one envelope, ``{"count", "next", "previous",
"results"}``, with ``?page=`` and ``?page_size=`` (≤ 200): :class:`CollectionPagination`.

Logs (a session's entries, a loop's steps, a task's events) only grow and are
ordered by a monotonic integer, so their cursor is simply "the last position I
saw": ``?after=<seq>`` (a position the client remembers, ideal for tailing) or
the opaque ``?cursor=`` a previous page's ``next`` link carries. Neither can
skip or repeat an item however fast writers append, and each page is one index
range scan (``WHERE seq > ? ORDER BY seq LIMIT ?``), whatever the log's length.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rest_framework import serializers
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

T = TypeVar("T")

__all__ = [
    "MAX_ENTRY_PAGE",
    "MAX_LOG_PAGE",
    "CollectionPagination",
    "EntryCursor",
    "KeysetQuery",
    "SeqCursor",
    "SessionPagination",
    "StepCursorPagination",
    "TaskEventCursorPagination",
    "TaskPagination",
    "keyset_response",
    "page_response",
]

#: Largest position a cursor may name (a 64-bit ``seq`` column).
MAX_POSITION = 2**63 - 1


class CollectionPagination(PageNumberPagination):
    """Every collection: ``?page=`` and ``?page_size=`` (≤ 200), the same envelope."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


def page_response(items: Any, request: Request, view: Any, serializer: Any) -> Response:
    """One page of ``items`` (a queryset or a list) rendered by ``serializer``, in the envelope.

    For views whose collection is not their own queryset (refs, a ref's log,
    documents, a workflow's links): the same page numbers and bounds as
    :class:`CollectionPagination` everywhere else.
    """
    paginator = CollectionPagination()
    rows: list[Any] | None = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response(serializer(rows, many=True).data)


def keyset_page(
    rows: Sequence[T], limit: int, key: Callable[[T], object]
) -> tuple[Sequence[T], object | None]:
    """One page of ``rows`` read with ``LIMIT limit + 1``, and the ``after`` of the next page.

    The extra row only tells whether a next page exists; ``None``: this is the last.
    """
    page = rows[:limit]
    return page, (key(page[-1]) if len(rows) > limit else None)


def keyset_response(
    results: Any, request: Request, *, count: int, next_after: object | None
) -> Response:
    """A keyset page in the collection envelope: ``next`` carries ``after=<next_after>``.

    For collections paged by the last item seen rather than a page number
    (``/refs``, ``/ref-log/{name}``: decision record 0033). Such pages go forward only,
    so ``previous`` is always ``null``; ``count`` is the whole collection's.
    """
    url: str | None = None
    if next_after is not None:
        url = remove_query_param(request.build_absolute_uri(), "page")
        url = replace_query_param(url, "after", str(next_after))
    return Response({"count": count, "next": url, "previous": None, "results": results})


class KeysetQuery(serializers.Serializer[Any]):
    """``?limit=`` (1–200, else 400) or the collections' ``?page_size=`` (capped at 200).

    ``?page=`` is refused past 1: a keyset collection has no page numbers, and
    ignoring one would answer page 1 again (decision record 0033).
    """

    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=CollectionPagination.max_page_size,
        help_text="Items per page (default 50, at most 200).",
    )
    page_size = serializers.IntegerField(
        required=False, min_value=1, help_text="Alias of limit; a larger size is capped at 200."
    )
    page = serializers.IntegerField(
        required=False, help_text="Only 1: later pages are reached by after (follow next)."
    )

    def validate_page(self, value: int) -> int:
        if value != 1:
            raise serializers.ValidationError(
                "this collection pages by after, not by page number: follow next"
            )
        return value

    def page_limit(self) -> int:
        """The page size the query asks for, within the collections' bounds."""
        values = self.validated_data
        if "limit" in values:
            return int(values["limit"])
        size = int(values.get("page_size", CollectionPagination.page_size))
        return min(size, CollectionPagination.max_page_size)


class SessionPagination(CollectionPagination):
    """Session listings (newest first)."""


class TaskPagination(CollectionPagination):
    """Task listings, paged like sessions."""


class StepCursorPagination(CursorPagination):
    """A loop session's steps in insertion order (the ``Step`` primary key)."""

    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000


class TaskEventCursorPagination(CursorPagination):
    """A task's event log in ``sequence`` order."""

    ordering = "sequence"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000


#: Largest page of the seq-ordered logs: entries, task events, a log session's lines.
MAX_LOG_PAGE = 1000


class _CursorQuery(serializers.Serializer[Any]):
    after = serializers.IntegerField(required=False, min_value=0, max_value=MAX_POSITION)
    cursor = serializers.CharField(required=False, max_length=64)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LOG_PAGE)


class SeqCursor:
    """Parse ``after``/``cursor``/``limit`` and build the page for a ``seq``-ordered log.

    ``fetch(after, limit)`` is the store call that reads positions ``> after``;
    one extra item is asked for to know whether a next page exists.
    """

    default_limit = 100

    def __init__(self, request: Request) -> None:
        query = _CursorQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        self.request = request
        self.limit: int = values.get("limit", self.default_limit)
        after: int = values.get("after", 0)
        if "cursor" in values:
            after = self._decode(values["cursor"])
        self.after = after

    @staticmethod
    def encode(position: int) -> str:
        return base64.urlsafe_b64encode(f"p={position}".encode()).decode().rstrip("=")

    @staticmethod
    def _decode(cursor: str) -> int:
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
            key, _, value = text.partition("=")
            position = int(value)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            position = -1
            key = ""
        if key != "p" or not 0 <= position <= MAX_POSITION:
            raise serializers.ValidationError({"cursor": ["Invalid cursor."]})
        return position

    def page(self, items: Sequence[Any], position_of: Any) -> tuple[list[Any], str | None]:
        """Trim ``items`` (fetched with ``limit + 1``) to a page and build the ``next`` link."""
        rows = list(items[: self.limit])
        if len(items) <= self.limit or not rows:
            return rows, None
        return rows, self.next_url(position_of(rows[-1]))

    def next_url(self, position: int) -> str:
        """The ``next`` link of a page whose last item is at ``position``."""
        url = self.request.build_absolute_uri()
        url = remove_query_param(url, "after")
        return replace_query_param(url, "cursor", self.encode(position))


#: Largest page of the tree, branch and message listings: their rows are
#: heavier to build than a plain entry page (measured in bench/bounded_reads.py).
MAX_ENTRY_PAGE = 500


class _EntryCursorQuery(serializers.Serializer[Any]):
    cursor = serializers.CharField(required=False, max_length=512)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ENTRY_PAGE)


class EntryCursor:
    """``cursor``/``limit`` for listings ordered by something other than ``seq``.

    The depth-first tree and the messages in append order (timestamp, then
    ``seq``) page after *the last entry seen*: the opaque ``cursor`` of a ``next``
    link names that entry's id, and the store reads what follows it. Like
    :class:`SeqCursor` it asks the store for one item more than the page.
    """

    default_limit = 100

    def __init__(self, request: Request) -> None:
        query = _EntryCursorQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        self.request = request
        self.limit: int = values.get("limit", self.default_limit)
        #: The last entry seen ("" on the first page) and, for the tree, its depth.
        self.after: str = ""
        self.depth: int | None = None
        if "cursor" in values:
            self.after, self.depth = self._decode(values["cursor"])

    @staticmethod
    def encode(entry_id: str, depth: int | None = None) -> str:
        text = f"e={entry_id}" if depth is None else f"d={depth};e={entry_id}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @staticmethod
    def _decode(cursor: str) -> tuple[str, int | None]:
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            text = ""
        depth: int | None = None
        if text.startswith("d="):
            head, _, text = text.partition(";")
            try:
                depth = int(head[2:])
            except ValueError:
                depth = -1
        key, _, entry_id = text.partition("=")
        if key != "e" or not entry_id or (depth is not None and not 0 <= depth <= MAX_POSITION):
            raise serializers.ValidationError({"cursor": ["Invalid cursor."]})
        return entry_id, depth

    def page(
        self, items: Sequence[Any], entry_id_of: Any, depth_of: Any = None
    ) -> tuple[list[Any], str | None]:
        """Trim ``items`` (fetched with ``limit + 1``) to a page and build the ``next`` link."""
        rows = list(items[: self.limit])
        if len(items) <= self.limit or not rows:
            return rows, None
        last = rows[-1]
        cursor = self.encode(entry_id_of(last), depth_of(last) if depth_of else None)
        url = replace_query_param(self.request.build_absolute_uri(), "cursor", cursor)
        return rows, url

"""Ref subcommands: ``refs [PREFIX]`` and ``ref NAME [--log]``.

    manage.py agentstore refs team/                     # the first 1,000, in byte order
    manage.py agentstore refs team/ --after team/k      # the next ones
    manage.py agentstore refs --json --limit 0          # all of them, as JSON lines
    manage.py agentstore ref team/main --log --limit 20 # the 20 newest updates

A ref whose session is gone is listed as ``dangling``.

Both read through ``RefStore``'s pages (``list_refs``/``ref_log`` with
``after`` and ``limit``, decision record 0033): ``--limit`` bounds what is printed
(default 1,000 refs, 100 log rows; ``0`` for everything) and the rows are read
:data:`PAGE` at a time, so even ``--limit 0`` holds one page in memory — a
table is printed per page, JSON lines as they come. When rows are left, a
hint on stderr names the ``--after`` that continues.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, short_id, stamp, table, usage

__all__ = ["COMMANDS", "PAGE"]

#: Rows read per query (and printed per table).
PAGE = 500

T = TypeVar("T")
K = TypeVar("K")


def _pages(
    fetch: Callable[[K, int], list[T]], start: K, key: Callable[[T], K], limit: int
) -> Iterator[tuple[list[T], K | None]]:
    """Pages of at most :data:`PAGE` rows until ``limit`` rows (``0``: no limit).

    ``fetch(after, n)`` reads ``n`` rows after ``after``. The last page comes
    with the keyset that continues after it when ``limit`` left rows unread
    (else, and with every other page, ``None``).
    """
    after, left = start, limit or None
    while True:
        size = PAGE if left is None else min(PAGE, left)
        rows = fetch(after, size + 1)  # one more: are rows left?
        page = rows[:size]
        if left is not None:
            left -= len(page)
        more = len(rows) > size
        after = key(page[-1]) if page else after
        if not more:
            yield page, None
            return
        if left == 0:
            yield page, after
            return
        yield page, None


def _limit(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


def _state(store: Any, name: str) -> str:
    try:
        store.resolve_ref(name)
    except exceptions.NoSession:
        return "dangling"
    except exceptions.NoRef:
        return "none"
    return "ok"


def _refs_arguments(parser: Any) -> None:
    parser.add_argument("prefix", nargs="?", default="", help="only names starting with this")
    parser.add_argument("--after", default="", help="only names after this one (continue)")
    parser.add_argument(
        "--limit", type=_limit, default=1000, help="print at most this many (0: all; 1000)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines on stdout")


def _refs(name: str, ctx: Context) -> None:
    from agentstore.stores import LogStore

    store = LogStore(read_only=True)
    prefix = ctx.opt("prefix")

    def fetch(after: str, n: int) -> list[Any]:
        return store.list_refs(prefix, after=after, limit=n)

    shown = 0
    pages = _pages(fetch, ctx.opt("after", ""), lambda ref: ref.name, ctx.opt("limit", 1000))
    try:
        for page, more in pages:
            rows: list[dict[str, Any]] = [
                {
                    "name": ref.name,
                    "session": ref.target.session,
                    "entry": ref.target.entry,
                    "state": _state(store, ref.name),
                    "updated_at": ref.updated_at,
                }
                for ref in page
            ]
            shown += len(rows)
            if ctx.opt("json"):
                for row in rows:
                    ctx.json(row)
            elif rows:
                table(
                    ctx,
                    ["NAME", "SESSION", "ENTRY", "STATE"],
                    [[r["name"], r["session"], short_id(r["entry"]), r["state"]] for r in rows],
                )
            if more is not None:
                ctx.note(f"More refs: --after {more}")
    except exceptions.RefNameError as exc:
        raise usage(str(exc)) from None
    if not shown and not ctx.opt("json"):
        ctx.note("No refs.")


def _ref_arguments(parser: Any) -> None:
    parser.add_argument("name", help="ref name")
    parser.add_argument("--log", action="store_true", help="also show its updates, newest first")
    parser.add_argument(
        "--limit", type=_limit, default=100, help="with --log: at most this many (0: all; 100)"
    )
    parser.add_argument(
        "--after", type=_limit, default=None, help="with --log: only updates older than this"
    )
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _target(target: Any) -> dict[str, str] | None:
    return None if target is None else {"session": target.session, "entry": target.entry}


def _ref(name: str, ctx: Context) -> None:
    from agentstore.stores import LogStore

    store = LogStore(read_only=True)
    ref_name = ctx.opt("name")
    document: dict[str, Any] = {"ref": ref_name}
    try:
        target = store.resolve_ref(ref_name)
        document.update(_target(target) or {}, state="ok")
    except exceptions.RefNameError as exc:
        raise usage(str(exc)) from None
    except exceptions.NoSession as exc:
        document.update(_target(exc.target) or {}, state=f"dangling: {exc}")
    except exceptions.NoRef:
        if not ctx.opt("log"):
            raise fail(f"no such ref: {ref_name}") from None
        document["state"] = "none"
    if not ctx.opt("log"):
        if ctx.opt("json"):
            ctx.json(document)
        else:
            _show(ctx, document)
        return

    def fetch(after: int | None, n: int) -> list[Any]:
        return store.ref_log(ref_name, after=after, limit=n)

    limit = ctx.opt("limit", 100)
    pages = _pages(fetch, ctx.opt("after"), lambda row: row.position, limit)
    if ctx.opt("json"):
        # One document, so its rows are held together: --limit rows (every
        # row with 0, which the caller asked for); read a page at a time.
        document["log"] = []
        for page, more in pages:
            document["log"] += map(_log_row, page)
            if more is not None:
                document["more_after"] = more
        ctx.json(document)
        return
    _show(ctx, document)
    ctx.out("")
    for page, more in pages:
        table(
            ctx,
            ["TIME (UTC)", "FROM", "TO", "REASON"],
            [
                [stamp(i["time"]), _arrow(i["old"]), _arrow(i["new"]), i["reason"]]
                for i in map(_log_row, page)
            ],
        )
        if more is not None:
            ctx.note(f"Older updates: --after {more}")


def _show(ctx: Context, document: dict[str, Any]) -> None:
    for key in ("ref", "session", "entry", "state"):
        if document.get(key):
            ctx.out(f"{key:<8} {document[key]}")


def _log_row(item: Any) -> dict[str, Any]:
    return {
        "time": item.time,
        "old": _target(item.old),
        "new": _target(item.new),
        "reason": item.reason,
        "position": item.position,
    }


def _arrow(target: dict[str, str] | None) -> str:
    if not target:
        return "-"
    return target["session"] + (f"@{short_id(target['entry'])}" if target["entry"] else "")


COMMANDS = [
    Subcommand(("refs",), "List refs (optionally under a prefix).", _refs_arguments, _refs),
    Subcommand(("ref",), "Show one ref and, with --log, its history.", _ref_arguments, _ref),
]

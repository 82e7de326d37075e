"""Ref subcommands: ``refs [PREFIX]`` and ``ref NAME [--log]``.

    manage.py agentstore refs team/
    manage.py agentstore ref team/main --log

A ref whose session is gone is listed as ``dangling``.
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, stamp, table, usage

__all__ = ["COMMANDS"]


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
    parser.add_argument("--json", action="store_true", help="print JSON lines on stdout")


def _refs(name: str, ctx: Context) -> None:
    from agentstore.stores import LogStore

    store = LogStore(read_only=True)
    try:
        refs = store.list_refs(ctx.opt("prefix"))
    except exceptions.RefNameError as exc:
        raise usage(str(exc)) from None
    rows: list[dict[str, Any]] = [
        {
            "name": ref.name,
            "session": ref.target.session,
            "entry": ref.target.entry,
            "state": _state(store, ref.name),
            "updated_at": ref.updated_at,
        }
        for ref in refs
    ]
    if ctx.opt("json"):
        for row in rows:
            ctx.json(row)
        return
    if not rows:
        ctx.note("No refs.")
        return
    table(
        ctx,
        ["NAME", "SESSION", "ENTRY", "STATE"],
        [[r["name"], r["session"], r["entry"][:19] or "-", r["state"]] for r in rows],
    )


def _ref_arguments(parser: Any) -> None:
    parser.add_argument("name", help="ref name")
    parser.add_argument("--log", action="store_true", help="also show every update, newest first")
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
    if ctx.opt("log"):
        document["log"] = [
            {
                "time": item.time,
                "old": _target(item.old),
                "new": _target(item.new),
                "reason": item.reason,
            }
            for item in store.ref_log(ref_name)
        ]
    if ctx.opt("json"):
        ctx.json(document)
        return
    for key in ("ref", "session", "entry", "state"):
        if document.get(key):
            ctx.out(f"{key:<8} {document[key]}")
    if ctx.opt("log"):
        ctx.out("")

        def show(target: dict[str, str] | None) -> str:
            if not target:
                return "-"
            return target["session"] + (f"@{target['entry'][:19]}" if target["entry"] else "")

        table(
            ctx,
            ["TIME (UTC)", "FROM", "TO", "REASON"],
            [
                [stamp(i["time"]), show(i["old"]), show(i["new"]), i["reason"]]
                for i in document["log"]
            ],
        )


COMMANDS = [
    Subcommand(("refs",), "List refs (optionally under a prefix).", _refs_arguments, _refs),
    Subcommand(("ref",), "Show one ref and, with --log, its history.", _ref_arguments, _ref),
]

"""Append-to-delivery latency of followers in other processes: NOTIFY vs polling.

    .venv/bin/python bench/follow_latency.py                        # all three setups
    .venv/bin/python bench/follow_latency.py --setups pg-notify --appends 100

One writer *process* appends 1 KB ``item`` lines (``LogStore.append``) to
``--sessions`` log sessions in turn, ``--gap`` seconds apart. ``--followers``
followers (``LogStore.afollow``: async, as under ASGI) spread over
``--processes`` follower processes follow those sessions — each session has
``followers / sessions`` of them — and record the wall clock at which each
``appended`` change arrives. Latency is that minus the wall clock just before
the writer called ``append`` (so it includes the write itself; the writer's
own append time is printed beside it). Setups:

* ``sqlite-poll`` — a SQLite file (WAL): followers poll (100 ms, backing off to 1 s);
* ``pg-poll``     — PostgreSQL with ``AGENTSTORE["NOTIFY"] = False``: the same polling;
* ``pg-notify``   — PostgreSQL with NOTIFY: each follower process has one
  LISTEN connection and its followers wake when the append commits
  (agentstore/notify.py; docs/operations.md, "Scaling out").

Every follower must see every entry of its session exactly once, in order;
the script says so (``missing``, ``dupes``, ``out of order``). All processes
start together through ``tests/processes.py``'s ready handshake: followers
announce ready after their snapshot (and, with NOTIFY, once listening).

PostgreSQL: ``--pg-url`` (default ``postgres://postgres@127.0.0.1:5432/agentstore_pgscale_bench``;
created if missing). Printed, never asserted: report ``uptime`` beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.log_append import item  # noqa: E402  (1 KB ``item`` lines, as that bench writes)

PG_URL = "postgres://postgres@127.0.0.1:5432/agentstore_pgscale_bench"


def setup_django(url: str, notify: bool) -> None:
    common.setup_django(url, migrate=False)
    from django.conf import settings

    from agentstore.conf import agentstore_settings

    settings.AGENTSTORE = {"NOTIFY": notify}
    agentstore_settings.reload()


# -- roles (each its own OS process) ---------------------------------------------------


def role_write(args: argparse.Namespace) -> None:
    from agentstore.stores import LogStore
    from tests.workers.start import ready_then_wait

    sessions = args.session_ids.split(",")
    store = LogStore()
    for sid in sessions:
        store.open(sid)  # take the holds before the clock starts
    ready_then_wait(args.start_file)
    for n in range(args.appends):
        sid = sessions[n % len(sessions)]
        sent = time.time()
        entry_id = store.append(sid, item(n))
        acked = time.time()
        print(json.dumps({"id": entry_id, "sent": sent, "acked": acked}), flush=True)
        time.sleep(args.gap)
    store.close()


async def follow_one(sid: str, want: int, ready: asyncio.Event, out: list[Any]) -> None:
    from agentstore.stores import LogStore

    store = LogStore(read_only=True)
    got: list[tuple[str, float]] = []
    async for change in store.afollow(sid):
        if change.kind == "snapshot":
            ready.set()
            continue
        if change.kind == "appended":
            got.append((change.entry_id, time.time()))
            if len(got) >= want:
                break
    out.append({"session": sid, "got": got})


async def follow_all(args: argparse.Namespace) -> list[Any]:
    from agentstore import notify
    from tests.workers.start import ready_then_wait

    sessions = args.session_ids.split(",")
    mine = [sessions[(args.index + i * args.processes) % len(sessions)] for i in range(args.k)]
    want = args.appends // len(sessions)
    out: list[Any] = []
    readies = [asyncio.Event() for _ in mine]
    tasks = [
        asyncio.create_task(follow_one(sid, want, ready, out))
        for sid, ready in zip(mine, readies, strict=True)
    ]
    for ready in readies:
        await ready.wait()
    if args.notify:
        listening = await asyncio.to_thread(notify.wait_listening, "default", 60)
        if not listening:
            raise SystemExit("the listener never connected")
    await asyncio.to_thread(ready_then_wait, args.start_file)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=args.deadline)
    return out


def role_follow(args: argparse.Namespace) -> None:
    out = asyncio.run(follow_all(args))
    print(json.dumps(out), flush=True)


# -- the driver ------------------------------------------------------------------------


def ensure_pg_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not found:
            conn.execute(f'CREATE DATABASE "{name}"')


def run_setup(name: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    from tests.processes import Launcher

    notify = name == "pg-notify"
    env = {"DATABASE_URL": url}
    migrate = [sys.executable, "manage.py", "migrate", "--verbosity", "0"]
    subprocess.run(migrate, cwd=ROOT, env={**os.environ, **env}, check=True)
    creator = subprocess.run(
        [sys.executable, __file__, "--role", "create", "--sessions", str(args.sessions)],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
    )
    session_ids = creator.stdout.strip()
    per_process = args.followers // args.processes
    common = [
        "--session-ids",
        session_ids,
        "--appends",
        str(args.appends),
        "--notify",
        "1" if notify else "0",
        "--deadline",
        str(args.deadline),
    ]
    with Launcher(url) as launcher:
        followers = [
            launcher.spawn(
                __file__,
                "--role",
                "follow",
                "--index",
                str(i),
                "--processes",
                str(args.processes),
                "--k",
                str(per_process),
                *common,
            )
            for i in range(args.processes)
        ]
        writer = launcher.spawn(__file__, "--role", "write", "--gap", str(args.gap), *common)
        launcher.release()
        writes = launcher.lines(writer, timeout=args.deadline + 60)
        results: list[list[dict[str, Any]]] = [
            launcher.lines(p, timeout=args.deadline + 60)[-1]  # type: ignore[misc]
            for p in followers
        ]
    sent = {w["id"]: w["sent"] for w in writes}
    acked = {w["id"]: w["acked"] for w in writes}
    order = {w["id"]: n for n, w in enumerate(writes)}
    latencies: list[float] = []
    after_ack: list[float] = []
    missing = dupes = disorder = 0
    by_session: dict[str, list[str]] = {}
    for n, w in enumerate(writes):
        by_session.setdefault(session_ids.split(",")[n % args.sessions], []).append(w["id"])
    for proc_result in results:
        for follower in proc_result:
            got = [entry_id for entry_id, _at in follower["got"]]
            expected = by_session[follower["session"]]
            missing += len(set(expected) - set(got))
            dupes += len(got) - len(set(got))
            disorder += sum(1 for a, b in zip(got, got[1:], strict=False) if order[a] > order[b])
            latencies += [at - sent[entry_id] for entry_id, at in follower["got"]]
            after_ack += [at - acked[entry_id] for entry_id, at in follower["got"]]
    ms = sorted(x * 1000 for x in latencies)
    writes_ms = sorted((w["acked"] - w["sent"]) * 1000 for w in writes)
    return {
        "setup": name,
        "deliveries": len(ms),
        "p50": statistics.median(ms),
        "p99": ms[max(int(len(ms) * 0.99) - 1, 0)],
        "max": ms[-1],
        "append_p50": statistics.median(writes_ms),
        "ack_p50": statistics.median(after_ack) * 1000,
        "missing": missing,
        "dupes": dupes,
        "disorder": disorder,
    }


def role_create(args: argparse.Namespace) -> None:
    from agentstore.stores import LogStore

    store = LogStore()
    ids = [store.create({"cwd": f"/bench/follow/{n}"}).id for n in range(args.sessions)]
    store.close()
    print(",".join(ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", default="drive", choices=["drive", "create", "write", "follow"])
    parser.add_argument("--setups", nargs="+", default=["sqlite-poll", "pg-poll", "pg-notify"])
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--appends", type=int, default=200, help="entries written in all")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4, help="follower processes")
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between appends")
    parser.add_argument("--deadline", type=float, default=300.0)
    # role arguments
    parser.add_argument("--session-ids", default="")
    parser.add_argument("--notify", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--k", type=int, default=0)
    parser.add_argument("--start-file", default="")
    common.add_json_flag(parser)
    args = parser.parse_args()

    if args.role != "drive":
        setup_django(os.environ["DATABASE_URL"], bool(args.notify))
        {"create": role_create, "write": role_write, "follow": role_follow}[args.role](args)
        return

    print(
        f"{args.followers} followers in {args.processes} processes, {args.sessions} sessions, "
        f"{args.appends} appends {args.gap}s apart by another process "
        f"({args.appends * args.followers // args.sessions} deliveries)"
    )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.setups:
            if name.startswith("pg"):
                ensure_pg_database(args.pg_url)
                url = args.pg_url
            else:
                url = "sqlite:///" + str(Path(tmp) / "follow.sqlite3")
            r = run_setup(name, url, args)
            print(
                f"  {r['setup']:<12} p50 {r['p50']:7.1f} ms   p99 {r['p99']:7.1f} ms   "
                f"max {r['max']:7.1f} ms   ({r['deliveries']} deliveries; append p50 "
                f"{r['append_p50']:.1f} ms, after the append returned p50 {r['ack_p50']:.1f} ms; "
                f"missing {r['missing']}, dupes {r['dupes']}, "
                f"out of order {r['disorder']})",
                flush=True,
            )
            # Latencies: no raw sqlite3 baseline exists for a wake-up, so the
            # table prints the figures themselves.
            for q in ("p50", "p99"):
                common.record(
                    f"follow: append -> delivery {q}, {args.followers} followers",
                    r["setup"],
                    r[q],
                    unit="ms",
                )
    common.emit("follow_latency", args, engine_name="sqlite")


if __name__ == "__main__":
    main()

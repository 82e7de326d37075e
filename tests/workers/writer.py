"""A write-load worker: one OS process running short write transactions on a database.

Used by the multi-process tests and by ``bench/write_contention.py``::

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.workers.writer \
        --worker 3 --writes 500 --strategy helper --mode counter --start-file /tmp/go

Prints one JSON line: ``{"worker", "written", "errors", "error_messages",
"max_wait_ms", "seconds"}``. Strategies: ``helper`` (agentstore.db.write),
``naive`` (a plain ``transaction.atomic()``, the IMMEDIATE setting alone), ``raw``
(the stdlib ``sqlite3`` module, BEGIN IMMEDIATE, no Django). Modes: ``counter``
(read the row count, insert count+1 — needs serialised writers) and
``independent`` (unique keys per worker).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.workers.start import ready_then_wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--strategy", choices=["helper", "naive", "raw"], default="helper")
    parser.add_argument("--mode", choices=["counter", "independent"], default="counter")
    parser.add_argument("--start-file", default="")
    parser.add_argument("--timeout", type=float, default=None, help="busy timeout (s) override")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from django.db import connection, transaction

    from agentstore import db
    from agentstore.models import Document

    if args.timeout is not None:
        connection.settings_dict["OPTIONS"]["timeout"] = args.timeout
    namespace = "counter" if args.mode == "counter" else "independent"

    def write_one(i: int) -> None:
        if args.mode == "counter":
            n = Document.objects.filter(namespace=namespace).count()
            key = f"{n + 1:07d}"
        else:
            key = f"{args.worker:03d}-{i:07d}"
        Document.objects.create(
            namespace=namespace,
            key=key,
            value_json=json.dumps({"worker": args.worker, "i": i}),
            updated_at=datetime.now(UTC),
        )

    raw: sqlite3.Connection | None = None
    if args.strategy == "raw":
        raw = sqlite3.connect(
            connection.settings_dict["NAME"],
            timeout=connection.settings_dict["OPTIONS"]["timeout"],
            isolation_level=None,
        )
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("PRAGMA synchronous=NORMAL")

    def raw_write_one(i: int) -> None:
        assert raw is not None
        raw.execute("BEGIN IMMEDIATE")
        try:
            if args.mode == "counter":
                (n,) = raw.execute(
                    "SELECT COUNT(*) FROM agentstore_document WHERE namespace = ?", (namespace,)
                ).fetchone()
                key = f"{n + 1:07d}"
            else:
                key = f"{args.worker:03d}-{i:07d}"
            raw.execute(
                "INSERT INTO agentstore_document (namespace, document_key, value_json, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (
                    namespace,
                    key,
                    json.dumps({"worker": args.worker, "i": i}),
                    datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f"),
                ),
            )
            raw.execute("COMMIT")
        except BaseException:
            raw.execute("ROLLBACK")
            raise

    connection.ensure_connection()
    ready_then_wait(args.start_file)

    written = 0
    errors: list[str] = []
    max_wait = 0.0
    started = time.monotonic()
    for i in range(args.writes):
        t0 = time.monotonic()
        try:
            if args.strategy == "helper":
                db.write(lambda cursor, i=i: write_one(i), orm=True)
            elif args.strategy == "naive":
                with transaction.atomic():
                    write_one(i)
            else:
                raw_write_one(i)
            written += 1
        except Exception as exc:  # counted and reported, never hidden
            errors.append(f"{type(exc).__name__}: {exc}")
        max_wait = max(max_wait, time.monotonic() - t0)
    print(
        json.dumps(
            {
                "worker": args.worker,
                "written": written,
                "errors": len(errors),
                "error_messages": sorted(set(errors))[:5],
                "max_wait_ms": round(max_wait * 1000, 1),
                "seconds": round(time.monotonic() - started, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

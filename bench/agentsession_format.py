"""agentsession format throughput: our append/read+verify vs a bare json+hashlib loop.

    .venv/bin/python bench/agentsession_format.py                # 3000 entries, 3 rounds
    .venv/bin/python bench/agentsession_format.py --entries 10000 --floats

``ours`` appends N item entries to an in-memory ``Session`` (validation, I-JSON
checks, call rules, RFC 8785 content hash + envelope id, the exact line) and then
``loads`` the written file (strict parse, every id recomputed, resume leaf).
``raw`` does the bare minimum the same hashes need with the stdlib: ``json.dumps
(sort_keys=True)`` + ``hashlib`` (which is *not* RFC 8785 for floats or non-ASCII
member names — it is the floor, not a competitor). ``--floats`` adds a float member
to every body, which sends canonicalisation down the ``rfc8785`` slow path.
Ratios are printed for reading, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentstore.formats import agentsession  # noqa: E402
from bench import common  # noqa: E402


def body(i: int, floats: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"message {i} é"}],
        },
        "acme:n": i,
    }
    if floats:
        out["acme:f"] = i * 0.5
    return out


def ours(n: int, floats: bool) -> tuple[float, float]:
    counter = itertools.count()
    session = agentsession.Session.new({"id": "bench"})
    session.clock = lambda: f"2026-09-17T12:00:00.{next(counter) % 10**7}1Z"
    start = time.perf_counter()
    for i in range(n):
        session.append(body(i, floats))
    appended = time.perf_counter()
    text = agentsession.dumps(session)
    read_start = time.perf_counter()
    agentsession.loads(text)
    return appended - start, time.perf_counter() - read_start


def _h(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode()).hexdigest()


def raw(n: int, floats: bool) -> tuple[float, float]:
    parent = None
    lines = []
    start = time.perf_counter()
    for i in range(n):
        obj = {**body(i, floats), "parent": parent, "ts": f"2026-09-17T12:00:00.{i % 10**7}1Z"}
        content = {k: v for k, v in obj.items() if k not in ("type", "parent", "ts")}
        env = {"type": obj["type"], "parent": parent, "ts": obj["ts"], "content": _h(content)}
        obj["id"] = parent = _h(env)
        lines.append(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    appended = time.perf_counter()
    for line in lines:
        obj = json.loads(line)
        content = {k: v for k, v in obj.items() if k not in ("type", "parent", "ts", "id")}
        env = {
            "type": obj["type"],
            "parent": obj["parent"],
            "ts": obj["ts"],
            "content": _h(content),
        }
        assert _h(env) == obj["id"]
    return appended - start, time.perf_counter() - appended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floats", action="store_true")
    common.add_json_flag(parser)
    args = parser.parse_args()
    n = args.entries
    best_ours = min((ours(n, args.floats) for _ in range(args.rounds)), key=sum)
    best_raw = min((raw(n, args.floats) for _ in range(args.rounds)), key=sum)
    for label, i in (("append", 0), ("read+verify", 1)):
        print(
            f"{label:12} ours {n / best_ours[i]:9.0f}/s   raw json+hashlib {n / best_raw[i]:9.0f}/s"
            f"   ratio {best_raw[i] / best_ours[i]:.2f}x"
        )
        workload = f"format: {label} {n:,} entries in memory" + (", floats" if args.floats else "")
        common.record(workload, "json+hashlib", n / best_raw[i], role="raw")
        common.record(workload, "agentsession format", n / best_ours[i])
    common.emit("agentsession_format", args, engine_name="none")


if __name__ == "__main__":
    main()

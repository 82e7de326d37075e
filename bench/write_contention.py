"""Write contention on one SQLite file: agentstore's writer queue vs naive Django vs raw sqlite3.

    .venv/bin/python bench/write_contention.py              # 1, 4 and 8 processes
    .venv/bin/python bench/write_contention.py --processes 8 --writes 500 --rounds 3

Each round creates a fresh migrated database, then starts N OS processes that
each run W short read-then-write transactions (count the rows, insert count+1)
at the same moment, with one of three strategies:

* ``raw``    — the stdlib ``sqlite3`` module: ``BEGIN IMMEDIATE``, the same busy timeout;
* ``naive``  — Django ORM in ``transaction.atomic()`` with ``transaction_mode=IMMEDIATE``
  and the busy timeout (``--timeout``, 5 s by default like Python's), nothing else;
* ``helper`` — ``agentstore.db.write`` (file-lock writer queue + busy retry).

It prints, per strategy, the errors that escaped to callers, throughput and the
worst single wait, and the helper's throughput as a ratio of raw sqlite3's in the
same run. Timings are for reading, never for asserting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from tests.processes import release  # noqa: E402

WHO = {
    "raw": ("raw sqlite3", "raw"),
    "naive": ("naive ORM", "other"),
    "helper": ("agentstore.db.write", "agentstore"),
}


def run_round(strategy: str, processes: int, writes: int, timeout: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp).resolve()}/bench.sqlite3"
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "project.settings"}
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        start_file = Path(tmp) / "go"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.workers.writer",
                    "--worker",
                    str(n),
                    "--writes",
                    str(writes),
                    "--strategy",
                    strategy,
                    "--mode",
                    "counter",
                    "--start-file",
                    str(start_file),
                    "--timeout",
                    str(timeout),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(processes)
        ]
        # Released together once every writer is set up (the handshake of
        # tests/processes.py): a fixed sleep let early writers run alone.
        release(start_file, procs)
        t0 = time.monotonic()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            if proc.returncode:
                raise SystemExit(f"worker failed: {err}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        elapsed = time.monotonic() - t0
    written = sum(r["written"] for r in results)
    return {
        "errors": sum(r["errors"] for r in results),
        "written": written,
        "writes_per_s": written / elapsed,
        "max_wait_ms": max(r["max_wait_ms"] for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument(
        "--writes", type=int, default=500, help="per process (default: %(default)r)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="(default: %(default)r)")
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="busy timeout in seconds (default: %(default)r)"
    )
    common.add_json_flag(parser)
    args = parser.parse_args()

    print(
        f"{'procs':>5} {'strategy':>8} {'escaped':>8} {'written':>8} {'writes/s':>9} "
        f"{'max wait ms':>11}  ratio vs raw"
    )
    for processes in args.processes:
        summary: dict[str, dict[str, float]] = {}
        for strategy in ("raw", "naive", "helper"):
            rounds = [
                run_round(strategy, processes, args.writes, args.timeout)
                for _ in range(args.rounds)
            ]
            summary[strategy] = {
                "errors": sum(r["errors"] for r in rounds),
                "written": sum(r["written"] for r in rounds),
                "writes_per_s": sum(r["writes_per_s"] for r in rounds) / len(rounds),
                "max_wait_ms": max(r["max_wait_ms"] for r in rounds),
            }
        raw_rate = summary["raw"]["writes_per_s"]
        for strategy, s in summary.items():
            print(
                f"{processes:>5} {strategy:>8} {int(s['errors']):>8} {int(s['written']):>8} "
                f"{s['writes_per_s']:>9.0f} {s['max_wait_ms']:>11.1f}  "
                f"{s['writes_per_s'] / raw_rate:.2f}x"
            )
            workload = f"contention: read-then-write, {processes} process" + "es" * (processes > 1)
            common.record(workload, WHO[strategy][0], s["writes_per_s"], role=WHO[strategy][1])
    common.emit("write_contention", args, engine_name="sqlite")


if __name__ == "__main__":
    main()

"""``manage.py agentstore export``/``import``: loop sessions and graph threads, and hostile paths.

Loop sessions and LangGraph threads travel in ``agentstore/1`` files: every
stored field comes back (bytes, stamps, order), reading and writing stream,
and a file that fails anywhere stores nothing. Every path and line is checked:
devices, directories, ``/proc/self``, NUL, non-UTF-8, lone surrogates, a file
cut short, deep JSON, ``1e999``, an empty file — each a one-line error with a
non-zero exit code (docs/commands.md, "Files").
"""

from __future__ import annotations

import io
import json
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from agentstore.cli import transfer
from agentstore.exceptions import BadFile
from agentstore.formats import agentstore_jsonl
from agentstore.formats.lines import LineReader
from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite, Grant, Session, Step
from agentstore.stores import LoopStore, SessionStore, TreeStore
from agentstore.stores.checkpoint_rows import export_thread
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.stores.sessions import IMPORT_BATCH
from agentstore.types import FinalizeSummary, MessageEntity, RunStep
from agentstore.types.checkpoints import ChannelBlob, PendingWriteRow

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("agentstore", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fails(*args: str, code: int = 1) -> str:
    """stderr and the CommandError's message of a failing command, with its exit code checked."""
    err = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("agentstore", *args, stdout=StringIO(), stderr=err)
    assert info.value.returncode == code, str(info.value)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return err.getvalue() + message


# -- building sessions ----------------------------------------------------------------


def loop_session(sid: str = "loop-1", steps: int = 3) -> str:
    """A loop session with every stored field set to something a copy could lose."""
    store = LoopStore(clock=lambda: T0 + timedelta(hours=1))
    SessionStore(clock=lambda: T0).create(
        "loop", session_id=sid, cwd="/w", name="named", model="gpt-x", system_prompt="be brief"
    )
    for n in range(steps):
        store.append(
            RunStep(
                session_id=sid,
                step_index=n % 2,  # repeats by design
                step_type="execute_js" if n % 2 else "user",
                content=f"step {n} ünïcode \u2028",
                tool_args=b'{ "code" :  "x" }' if n % 2 else None,  # spacing kept byte for byte
                duration_ms=n * 7,
                prompt_tokens=n,
                completion_tokens=2**40 + n,
                created_at=T0 + timedelta(microseconds=n),
            )
        )
    store.update_data(sid, b'{"city":  "Lisbon"}')
    store.finalize(
        sid,
        FinalizeSummary(
            status="completed",
            prompt_tokens=5,
            completion_tokens=6,
            step_count=steps,
            duration_ms=9,
            data_bytes_carried=17,
        ),
    )
    store.grant(sid, "run rm -rf build?")
    LoopStore(clock=lambda: T0 - timedelta(days=1)).grant(sid, "second\nline")
    return sid


def graph_thread(tid: str = "", using: str = "default") -> str:
    """A thread with a fork, a subgraph namespace, shared and cleared blobs, special writes.

    A new id each time: ``put`` touches a thread's session at most once a second
    per process, so an id reused by the previous test would miss its session row.
    """
    tid = tid or f"thread-{uuid.uuid4().hex[:12]}"
    store = CheckpointStore(using=using, clock=lambda: T0)
    binary = bytes(range(256))  # not UTF-8: base64 must carry it
    store.put(
        tid,
        "",
        "1ef0-0001",
        None,
        "msgpack",
        b"\x81\xa1v\x01",
        {"step": 0, "source": "input", "run_id": "run-a", "parents": {}},
        {"messages": "00001.0.1", "flag": "00001.0.2"},
        [ChannelBlob(channel="messages", version="00001.0.1", type="msgpack", blob=binary)],
        inline=[ChannelBlob(channel="flag", version="00001.0.2", type="msgpack", blob=b"\xc3")],
    )
    for cid in ("1ef0-0002", "1ef0-0003"):  # two children of the first: a fork
        store.put(
            tid,
            "",
            cid,
            "1ef0-0001",
            "msgpack",
            cid.encode(),
            {"step": 1, "writes": {"bot": [1, 2.5, None]}},
            {"messages": f"00002.0.{cid[-1]}"},
            [
                ChannelBlob(
                    channel="messages", version=f"00002.0.{cid[-1]}", type="empty", blob=None
                )
            ],
        )
    store.put(tid, "sub:task-1", "1ef0-0004", None, "json", b"{}", {}, {})
    store.put_writes(
        tid,
        "",
        "1ef0-0003",
        [
            PendingWriteRow(
                task_id="task-9",
                task_path="~bot",
                idx=0,
                channel="out",
                type="msgpack",
                blob=b"\x00\xff",
            ),
            PendingWriteRow(
                task_id="task-9", idx=-3, channel="__interrupt__", type="msgpack", blob=b"q"
            ),
        ],
        replace=True,
    )
    return tid


def rows_of(sid: str, using: str = "default") -> dict[str, Any]:
    """Every stored field of a session's rows (its own ids, owner and incarnation aside)."""

    def values(model: Any, **where: Any) -> list[dict[str, Any]]:
        found = []
        for row in model.objects.using(using).filter(**where).order_by("pk").values():
            row.pop("id", None)
            found.append({k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()})
        return found

    session = values(Session, pk=sid)
    for row in session:
        for key in ("owner_id", "incarnation"):
            row.pop(key)
    return {
        "session": session,
        "steps": values(Step, session_id=sid),
        "grants": values(Grant, session_id=sid),
        "checkpoints": values(Checkpoint, session_id=sid),
        "blobs": values(CheckpointBlob, session_id=sid),
        "writes": values(CheckpointWrite, session_id=sid),
    }


def delete(sid: str) -> None:
    SessionStore().delete(sid)


def write(path: Path, *lines: Any) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def header(kind: str = "loop", sid: str = "h-1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "session",
        "format": "agentstore/1",
        "kind": kind,
        "id": sid,
        "created_at": "2026-05-01T10:00:00.000000Z",
        "updated_at": "2026-05-01T10:00:01.000000Z",
        **extra,
    }


def step(n: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "type": "step",
        "step_index": n,
        "step_type": "user",
        "content": f"c{n}",
        "created_at": "2026-05-01T10:00:00.000001Z",
        **extra,
    }


# -- item 2: loop sessions and graph threads, losslessly -------------------------------


def test_a_loop_session_round_trips_every_field(tmp_path: Path) -> None:
    sid = loop_session()
    before = rows_of(sid)
    text, _ = run("export", sid)
    assert json.loads(text.rstrip("\n").split("\n")[0])["format"] == "agentstore/1"
    path = write(tmp_path / "loop.jsonl", text.rstrip("\n"))
    delete(sid)

    _, err = run("import", str(path))

    assert f"imported {path} as {sid} (3 steps, 2 grants)" in err
    assert rows_of(sid) == before
    assert before["steps"][1]["tool_args"] == b'{ "code" :  "x" }'
    assert LoopStore().grants(sid) == ["second\nline", "run rm -rf build?"]
    again, _ = run("export", sid)
    assert again == text  # byte for byte


def test_a_graph_thread_round_trips_every_row(tmp_path: Path) -> None:
    tid = graph_thread()
    before = rows_of(tid)
    assert len(before["checkpoints"]) == 4 and len(before["writes"]) == 2
    _, err = run("export", tid, "--out", str(tmp_path))
    assert "[1/1] · exported" in err
    path = tmp_path / f"{tid}.jsonl"
    text = path.read_text()
    delete(tid)

    _, err = run("import", str(path))

    assert "(4 checkpoints, 3 blobs, 2 writes)" in err
    assert rows_of(tid) == before
    assert before["blobs"][0]["blob"] == bytes(range(256))
    assert before["blobs"][1]["blob"] is None
    record = CheckpointStore().get(tid, "", "1ef0-0003")
    assert record is not None and [w.idx for w in record.writes] == [-3, 0]
    assert run("export", tid)[0] == text


def test_an_older_file_without_optional_fields_still_imports(tmp_path: Path) -> None:
    """Fields an agentstore/1 file leaves out take their defaults (a hand-written or older file)."""
    path = write(
        tmp_path / "old.jsonl",
        header(),
        step(0),
        {"type": "grant", "prompt": "ok?", "granted_at": "2026-05-01T10:00:00Z"},
        {"type": "end", "counts": {"step": 1, "grant": 1}},
    )
    run("import", str(path))
    stored = LoopStore().steps("h-1")
    assert [(s.content, s.tool_args, s.duration_ms) for s in stored] == [("c0", None, 0)]
    assert LoopStore().get("h-1").data is None


def test_a_newer_or_unknown_format_is_refused_by_name(tmp_path: Path) -> None:
    newer = write(tmp_path / "v2.jsonl", {**header(), "format": "agentstore/2"}, {"type": "end"})
    assert "from a newer agentstore; this version reads agentstore/1" in fails("import", str(newer))
    field = write(tmp_path / "f.jsonl", header(), step(0, colour="red"))
    assert "line 2: unknown field 'colour' in a step record" in fails("import", str(field))
    kind = write(tmp_path / "k.jsonl", header("tree"))
    assert "kind must be one of loop, graph" in fails("import", str(kind))
    wrong = write(tmp_path / "w.jsonl", header(), {"type": "checkpoint"})
    assert "line 2: a loop session has no 'checkpoint' records" in fails("import", str(wrong))
    assert not Session.objects.exists()


def test_long_records_travel_in_parts_under_the_line_limit(tmp_path: Path) -> None:
    sid = "long-1"
    # The session record itself (line 1) is long too: the file starts with a part.
    SessionStore().create("loop", session_id=sid, system_prompt="p" * 3000)
    store = LoopStore()
    store.append(RunStep(session_id=sid, step_type="tool", content="é" * 3000, created_at=T0))
    store.append(RunStep(session_id=sid, step_type="user", content="short", created_at=T0))
    before = rows_of(sid)
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        text, _ = run("export", sid)
        lines = text.rstrip("\n").split("\n")
        assert max(len(line.encode()) for line in lines) <= 1000
        parts = [json.loads(line) for line in lines if '"type":"part"' in line]
        assert len(parts) >= 10 and parts[-1]["last"] is True
        assert json.loads(lines[0])["type"] == "part"
        path = write(tmp_path / "long.jsonl", text.rstrip("\n"))
        delete(sid)
        run("import", str(path))
    assert rows_of(sid) == before


def test_a_file_cut_short_stores_nothing(tmp_path: Path) -> None:
    sid = loop_session()
    text, _ = run("export", sid)
    delete(sid)
    lines = text.rstrip("\n").split("\n")
    at_boundary = write(tmp_path / "cut.jsonl", *lines[:-1])  # the end record is gone
    assert "ends before its end record: it was cut short" in fails("import", str(at_boundary))
    mid_line = tmp_path / "torn.jsonl"
    mid_line.write_text(text[: len(text) - 12])
    assert f"line {len(lines)} is not JSON" in fails("import", str(mid_line))
    counted = write(tmp_path / "miscount.jsonl", *lines[:2], lines[-1])
    assert "records are missing" in fails("import", str(counted))
    assert not Session.objects.filter(pk=sid).exists() and not Step.objects.exists()


def test_a_bad_row_after_many_batches_rolls_the_whole_file_back(tmp_path: Path) -> None:
    rows = [step(n) for n in range(IMPORT_BATCH * 2 + 10)]
    rows.append(step(0, step_type="x" * 65))  # over Step.step_type's 64 characters
    path = write(tmp_path / "bad.jsonl", header(), *rows, {"type": "end", "counts": {}})
    err = fails("import", str(path))
    assert f"line {len(rows) + 1}: step.step_type is longer than 64 characters" in err
    assert not Session.objects.exists() and not Step.objects.exists()


def test_repeated_keys_are_errors_not_merges(tmp_path: Path) -> None:
    grant = {"type": "grant", "prompt": "same", "granted_at": "2026-05-01T10:00:00Z"}
    end = {"type": "end", "counts": {"step": 0, "grant": 2}}
    path = write(tmp_path / "g.jsonl", header(), grant, grant, end)
    assert "a grant repeats the key of another" in fails("import", str(path))
    tid = graph_thread()
    text, _ = run("export", tid)
    delete(tid)
    lines = text.rstrip("\n").split("\n")
    doubled = write(tmp_path / "c.jsonl", lines[0], lines[1], *lines[1:])
    assert "a checkpoint repeats the key of another" in fails("import", str(doubled))
    assert not Session.objects.exists() and not Checkpoint.objects.exists()


def test_an_existing_id_is_refused(tmp_path: Path) -> None:
    sid = loop_session()
    text, _ = run("export", sid)
    path = write(tmp_path / "again.jsonl", text.rstrip("\n"))
    before = rows_of(sid)
    assert "session already exists" in fails("import", str(path))
    assert rows_of(sid) == before


def test_export_reads_a_long_session_a_page_at_a_time() -> None:
    sid = "paged-1"
    for n in range(25):
        LoopStore().append(RunStep(session_id=sid, step_type="user", content=str(n)))
    with CaptureQueriesContext(connection) as queries:
        rows = LoopStore().export_rows(sid, page=10)
        next(rows)  # the session row
        next(rows)  # the first step: one page read, no more
        step_reads = [q for q in queries.captured_queries if "agentstore_step" in q["sql"]]
        assert len(step_reads) == 1 and "LIMIT 10" in step_reads[0]["sql"]
        rest = list(rows)
    assert len(rest) == 24
    step_reads = [q for q in queries.captured_queries if "agentstore_step" in q["sql"]]
    assert len(step_reads) == 3  # 10 + 10 + 5


def test_export_reads_a_long_thread_a_page_at_a_time() -> None:
    tid = graph_thread()
    with CaptureQueriesContext(connection) as queries:
        rows = list(export_thread(tid, page=2))
    checkpoint_reads = [
        q for q in queries.captured_queries if 'FROM "agentstore_checkpoint"' in q["sql"]
    ]
    assert len(checkpoint_reads) == 3 and len(rows) == 1 + 4 + 3 + 2


def test_import_writes_while_it_reads(tmp_path: Path) -> None:
    """The rows are not gathered first: batches are stored while the file is still being read."""
    seen: list[int] = []
    total = IMPORT_BATCH * 2 + 100

    def rows() -> Iterator[RunStep]:
        for n in range(total):
            if n == total - 1:
                seen.append(Step.objects.filter(session_id="s-1").count())
            yield RunStep(session_id="s-1", step_type="user", created_at=T0)

    session = agentstore_jsonl.Decoder(
        LineReader(io.BytesIO(json.dumps(header(sid="s-1")).encode() + b"\n")),
        (1, json.dumps(header(sid="s-1")).encode()),
    ).header()
    counts = LoopStore().import_session(session, rows())
    assert counts == {"step": total, "grant": 0}
    assert seen == [IMPORT_BATCH * 2]


def test_the_decoder_reads_the_file_as_rows_are_taken() -> None:
    lines = [
        header(),
        *(step(n) for n in range(1000)),
        {"type": "end", "counts": {"step": 1000, "grant": 0}},
    ]
    data = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    reader = LineReader(data)
    first = reader.first()
    assert first is not None
    decoder = agentstore_jsonl.Decoder(reader, first)
    decoder.header()
    rows = decoder.rows()
    next(rows)
    assert reader.number == 2  # one line past the header, not the file
    assert sum(1 for _ in rows) == 999


def test_progress_goes_to_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "PROGRESS_EVERY", 10)
    sid = loop_session(steps=25)
    out, err = run("export", sid)
    assert f"  {sid}: 10 lines…" in err and f"  {sid}: 20 lines…" in err
    assert "lines…" not in out
    path = write(tmp_path / "p.jsonl", out.rstrip("\n"))
    delete(sid)
    _, err = run("import", str(path))
    assert f"  {path}: 20 records…" in err


def test_a_tree_line_over_the_limit_is_refused_at_export() -> None:
    session = TreeStore().create_session("/w")
    TreeStore().append_message(session.id, None, MessageEntity(role="user", content="x" * 2000))
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        err = fails("export", session.id)
    assert "line 2 of its file is" in err and "DATA_UPLOAD_MAX_MEMORY_SIZE" in err


# -- item 1: every path and every line is bounded and checked ---------------------------


class Zeros(io.RawIOBase):
    """``/dev/zero`` as a stream: endless NUL bytes, counting what was read."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        buffer[:] = b"\0" * len(buffer)
        self.read_bytes += len(buffer)
        return len(buffer)


def test_a_line_is_read_bounded_never_whole() -> None:
    zeros = Zeros()
    reader = LineReader(io.BufferedReader(zeros, buffer_size=256), limit=1000)
    with pytest.raises(BadFile) as info:
        next(reader)
    assert info.value.line == 1 and "line 1 is longer than 1000 bytes" in str(info.value)
    assert zeros.read_bytes < 2000  # one bounded readline and a buffer, not the endless line


def test_import_from_an_endless_pipe_stops_at_the_line_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zeros = Zeros()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(zeros)))
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4096):
        err = fails("import", "-")
    assert "-: line 1 is longer than 4096 bytes (the DATA_UPLOAD_MAX_MEMORY_SIZE setting)" in err
    assert zeros.read_bytes < 3 * 8192


def test_devices_directories_and_missing_files_are_refused_before_reading(tmp_path: Path) -> None:
    assert "/dev/zero: is not a regular file" in fails("import", "/dev/zero")
    assert f"{tmp_path}: is a directory" in fails("import", str(tmp_path))
    assert "/proc/self: is a directory" in fails("import", "/proc/self")
    assert "nope.jsonl: no such file" in fails("import", str(tmp_path / "nope.jsonl"))
    assert "not a usable path (it contains NUL)" in fails("import", "a\x00b.jsonl")
    assert "'a\\x00b.jsonl'" in fails("import", "a\x00b.jsonl")  # shown escaped, on one line
    two = fails("import", "/dev/zero", str(tmp_path))
    assert "2 of 2 file(s) not imported" in two
    assert not Session.objects.exists()


def test_unusable_out_directories_fail_in_one_line(tmp_path: Path) -> None:
    sid = loop_session()
    afile = tmp_path / "file"
    afile.write_text("x")
    assert f"--out {afile}: exists and is not a directory" in fails(
        "export", sid, "--out", str(afile)
    )
    err = fails("export", sid, "--out", "/proc/self")
    assert "--out /proc/self: cannot write files there" in err
    assert "not a usable path (it contains NUL)" in fails("export", sid, "--out", "o\x00ut")
    err = fails("export", sid, "--out", str(afile / "below"))
    assert "cannot create the directory: Not a directory" in err


def test_a_failed_export_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = loop_session(steps=30)
    real = agentstore_jsonl.encode

    def breaks_midway(rows: Any, **kwargs: Any) -> Iterator[str]:
        for number, line in enumerate(real(rows, **kwargs)):
            if number == 10:
                raise BadFile("the disk gave up")
            yield line

    monkeypatch.setattr(agentstore_jsonl, "encode", breaks_midway)
    err = fails("export", sid, "--out", str(tmp_path))
    assert f"{sid}: not exported: the disk gave up" in err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / f"{sid}.jsonl").mkdir()  # the target is a directory: reported, nothing left
    monkeypatch.setattr(agentstore_jsonl, "encode", real)
    assert "not exported" in fails("export", sid, "--out", str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [f"{sid}.jsonl"]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"type":"step","content":"\\ud800"}', "line 2: the JSON contains a lone surrogate"),
        (b'{"type":"step","duration_ms":1e999}', "line 2: number 1e999 is out of range"),
        (b'{"type":"step","content":"nul \\u0000"}', "line 2: the JSON contains a NUL character"),
        (b'{"type":"step","x":' + b"[" * 150 + b"]" * 150 + b"}", "nests deeper than 100 levels"),
        (b'{"type":"step","x":' + b"[" * 100000 + b"]" * 100000 + b"}", "line 2 is not JSON"),
        (b'{"type":"step","content":"caf\xe9"}', "line 2 is not UTF-8 text"),
        (b'{"type":"step","created_at":"yesterday"}', "created_at is not an ISO 8601 timestamp"),
        (
            b'{"type":"step","created_at":"2026-05-01T10:00:00"}',
            "created_at must carry its time zone",
        ),
        (b'{"type":"step","step_index":true}', "step_index must be an integer"),
        (b'{"type":"step","created_at":"0001-01-01T00:00:00+01:00"}', "created_at is out of range"),
        (
            b'{"type":"step","step_type":"user","step_index":2147483648}',
            "step.step_index must be at most 2147483647",
        ),
        (
            b'{"type":"step","step_type":"user","tool_args":"not json"}',
            "step.tool_args must be valid JSON",
        ),
        (b"[1, 2]", 'line 2 is not a record (a JSON object with a "type")'),
    ],
)
def test_hostile_lines_are_refused_by_line(tmp_path: Path, line: bytes, why: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(json.dumps(header()).encode() + b"\n" + line + b"\n" + b'{"type":"end"}\n')
    err = fails("import", str(path))
    assert why in err, err
    assert not Session.objects.exists()


def test_a_non_utf8_pi_file_names_its_line(tmp_path: Path) -> None:
    source = (Path(__file__).resolve().parent.parent / "data" / "pi" / "v3.jsonl").read_bytes()
    lines = source.split(b"\n")
    lines[2] = lines[2].replace(b"a", b"\xff", 1)
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b"\n".join(lines))
    assert "latin.jsonl: line 3 is not UTF-8 text" in fails("import", str(path))
    assert not Session.objects.exists()


def test_a_pi_line_over_the_limit_is_refused_by_number(tmp_path: Path) -> None:
    path = tmp_path / "wide.jsonl"
    path.write_text('{"type":"session","version":3,"id":"w"}\n' + "x" * 5000 + "\n")
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        assert "wide.jsonl: line 2 is longer than 1000 bytes" in fails("import", str(path))


def test_empty_files_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "not imported: " in fails("import", str(empty))
    assert "the file is empty" in fails("import", str(empty))
    blank = write(tmp_path / "blank.jsonl", "", "   ")
    assert "the file is empty" in fails("import", str(blank))


def test_import_and_export_name_another_database_alias() -> None:
    assert "no such database alias: elsewhere" in fails(
        "import", "x", "--database", "elsewhere", code=2
    )
    assert "no such database alias: elsewhere" in fails(
        "export", "x", "--database", "elsewhere", code=2
    )


def test_export_all_writes_every_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ids are looked up a chunk at a time (more than one IN (…) may hold): 2 here.
    monkeypatch.setattr(transfer, "ID_CHUNK", 2)
    sid, tid = loop_session(), graph_thread()
    trees = [TreeStore().create_session("/w").id for _ in range(3)]
    _, err = run("export", "--all", "--out", str(tmp_path))
    assert "[5/5] · exported" in err
    expected = sorted(f"{k}.jsonl" for k in (sid, tid, *trees))
    assert sorted(p.name for p in tmp_path.iterdir()) == expected
    assert "needs --out DIR" in fails("export", "--all", code=2)
    assert "name the sessions to export, or --all" in fails("export", "--out", "x", code=2)
    assert "takes no session ids" in fails("export", "--all", sid, "--out", str(tmp_path), code=2)

"""Citations of decisions point at decision records that exist.

The numbered decision log that ``docs/`` once held became architecture decision
records, ``docs/decisions/NNNN-title.md`` (index: docs/decisions/README.md). Code,
tests and scripts cite a record as "decision record NNNN", or a dated measurement by
its ``bench/results/`` path; Markdown links to the record. A number of the retired
log, or the retired file's name, points at nothing, so this test refuses both outside
the files that are history: the records themselves (each ends with the old numbers it
replaces), the dated results in ``bench/results/`` and the CHANGELOG's entries, which
bench/results/README.md ("Decision numbers in the older diaries") maps to records.

It also checks that every record, results file and record number cited anywhere
exists, so a renamed or mistyped record is caught where it is cited.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "decisions"
RESULTS = ROOT / "bench" / "results"

#: Files that are a record of their day and keep the retired log's numbers.
HISTORICAL = ("docs/decisions/", "bench/results/", "CHANGELOG.md")

SUFFIXES = {".py", ".md", ".html", ".txt", ".sh", ".toml", ".cfg", ".ini", ".yml", ".yaml"}
SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist", "htmlcov"}

#: A line break with what continues a comment or docstring on the next line, so a
#: citation wrapped across lines reads as one.
_WRAP = re.compile(r"[ \t]*\n[ \t]*(?:#:?|\*|//)?[ \t]*")
#: "decision" or "decisions" and a number (the retired log's) — not "decision record".
_OLD_NUMBER = re.compile(r"\bdecisions?[ ]+(?!records?\b)\d", re.IGNORECASE)
_OLD_FILE = re.compile(r"docs/decisions\.md")
#: "decision record 0035", "decision records 0033 and 0013", "0037, 0038 and 0039".
_RECORD_NUMBERS = re.compile(
    r"\bdecision records?[ ]+(\d{4}(?:(?:,[ ]*|[ ]+and[ ]+)\d{4})*)", re.IGNORECASE
)
_RECORD_PATH = re.compile(r"docs/decisions/(\d{4}-[\w.-]*?\.md)")
_RESULTS_PATH = re.compile(r"bench/results/([\w.-]+?\.md)")
_MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _files() -> list[Path]:
    found = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in SKIPPED_DIRS and "egg-info" not in d
        )
        for name in sorted(names):
            path = Path(top, name)
            if path.suffix in SUFFIXES or path.parent.name == "scripts":
                found.append(path)
    return found


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _text(path: Path) -> str:
    return _WRAP.sub(" ", path.read_text(encoding="utf-8", errors="replace"))


def _historical(name: str) -> bool:
    return any(name == h or (h.endswith("/") and name.startswith(h)) for h in HISTORICAL)


def _cites_the_retired_log(text: str) -> list[str]:
    return [
        text[max(0, m.start() - 40) : m.end() + 20]
        for pattern in (_OLD_NUMBER, _OLD_FILE)
        for m in pattern.finditer(text)
    ]


def test_nothing_cites_the_retired_decision_log() -> None:
    found = {}
    for path in _files():
        name = _relative(path)
        if _historical(name):
            continue
        if cited := _cites_the_retired_log(_text(path)):
            found[name] = cited
    assert not found, (
        "cite the decision record (docs/decisions/README.md; bench/results/README.md maps "
        f"old numbers to records): {found}"
    )


def test_every_cited_record_and_result_exists() -> None:
    records = {p.name for p in RECORDS.glob("[0-9][0-9][0-9][0-9]-*.md")}
    numbers = {name[:4] for name in records}
    results = {p.name for p in RESULTS.glob("*.md")}
    missing = []
    for path in _files():
        name = _relative(path)
        text = _text(path)
        for m in _RECORD_NUMBERS.finditer(text):
            missing += [
                f"{name}: decision record {n}"
                for n in re.findall(r"\d{4}", m.group(1))
                if n not in numbers
            ]
        missing += [
            f"{name}: {m.group(0)}"
            for m in _RECORD_PATH.finditer(text)
            if m.group(1) not in records
        ]
        missing += [
            f"{name}: {m.group(0)}"
            for m in _RESULTS_PATH.finditer(text)
            if m.group(1) not in results
        ]
        if path.suffix == ".md":
            for m in _MARKDOWN_LINK.finditer(_CODE_SPAN.sub("", text)):
                target = m.group(1).split("#")[0]
                if not target or re.match(r"[a-z]+:", target):
                    continue
                resolved = (path.parent / target).resolve()
                inside = resolved.is_relative_to(RECORDS) or resolved.is_relative_to(RESULTS)
                if inside and not resolved.exists():
                    missing.append(f"{name}: link {target}")
    assert not missing, missing


def test_the_checks_see_what_they_are_meant_to() -> None:
    # The patterns, on the forms the files use (so a pattern that matches nothing
    # cannot pass the tests above by accident).
    # (Put together here, so this file does not cite the retired log itself.)
    old, number = "decision", 311
    wrapped = _WRAP.sub(" ", f"(docs/{old}s.md,\n    # {old} {number})")
    assert len(_cites_the_retired_log(wrapped)) == 2
    assert _cites_the_retired_log(f"{old.title()}s {number - 21} and 355") != []
    assert _cites_the_retired_log("(decision record 0035) and decision records 0033 and 0013") == []
    found = _RECORD_NUMBERS.search("decision records 0037, 0038 and 0039)")
    assert found is not None and re.findall(r"\d{4}", found.group(1)) == ["0037", "0038", "0039"]

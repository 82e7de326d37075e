"""Every short id shown — admin pages, pictures, command output — is ``agentstore.ids.short_id``.

A UUIDv7 starts with its millisecond timestamp, so the *head* of the ids of one
busy session is the same on every row; the helper shows a UUID's random tail
(and a ``sha256:`` id's first hex digits), which the command line and the
admin's search accept back. Places that cut an id themselves (``|truncatechars``,
``|slice``, ``[:8]``, ``[:19]``) showed heads that told nothing apart and that
no input accepted. This checks the pages and commands that showed such heads,
and scans the templates and the code for a new one.
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agentstore.formats.agentsession.describe import describe
from agentstore.ids import short_id
from agentstore.stores import TreeStore
from agentstore.stores.log import LogStore
from agentstore.types import MessageEntity, RefTarget
from tests.admin.seed import seed_world

ROOT = Path(__file__).resolve().parent.parent / "agentstore"

#: A template filter that cuts an id-like variable (``…id``, ``…hash``, ``entry``, ``first_kept``).
CUT_IN_TEMPLATE = re.compile(
    r"\{\{\s*[\w.]*(id|hash|entry|kept)\s*(\|[^}]*)?\|(truncatechars|slice|truncatewords)\b"
)
#: Python that cuts an id-like value for display: ``x_id[:8]``, ``leaf[:19]``, ``…id'])[-12:]``
#: (6 to 24 characters: a queryset's ``[:1]`` or ``[:50]`` is a row limit, not a cut id).
CUT_IN_CODE = re.compile(
    r"(_id|\bid|leaf|entry|first_kept|hash)['\"]?\s*[\])]*\s*\)?\[(:|-)([6-9]|1\d|2[0-4]):?\]"
)
#: Slices that are not display: generating an identity, parsing a format.
ALLOWED = {
    "agentstore/ids.py",  # the helper itself
    "agentstore/tasks/worker.py",  # a new worker id is made from a fresh UUID's tail
}


def test_no_template_cuts_an_id_itself() -> None:
    found = [
        f"{path.relative_to(ROOT.parent)}: {match.group(0)}"
        for path in ROOT.rglob("*.html")
        for match in CUT_IN_TEMPLATE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "use the |short filter (agentstore.ids.short_id)"


def test_no_code_cuts_an_id_for_display() -> None:
    found = []
    for path in ROOT.rglob("*.py"):
        name = str(path.relative_to(ROOT.parent))
        if "migrations" in path.parts or name in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CUT_IN_CODE.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == [], "use agentstore.ids.short_id"


@pytest.mark.django_db
def test_the_context_view_shows_the_usage_anchor_by_its_short_id(admin_client: Client) -> None:
    world = seed_world()
    url = reverse("admin:agentstore_session_context", args=[world.tree_id])
    page = admin_client.get(url).content.decode()
    assert f'title="{world.usage_id}">{short_id(world.usage_id)}</code>' in page
    assert f">{world.usage_id[:19]}…</code>" not in page


@pytest.mark.django_db
def test_a_compactions_kept_from_is_a_short_id_in_words() -> None:
    first_kept = "sha256:" + "ab" * 32
    view = describe({"type": "compaction", "summary": "s", "first_kept": first_kept})
    assert view.detail == f"keeps from {short_id(first_kept)}"
    assert short_id(first_kept) == "ab" * 6


@pytest.mark.django_db
def test_commands_show_label_targets_and_ref_entries_by_short_id() -> None:
    tree = TreeStore()
    sid = tree.create_session("/repo").id
    ask = tree.append_message(sid, None, MessageEntity(role="user", content="hi"))
    tree.append_label_change(sid, ask.id, ask.id, "start")
    out = StringIO()
    call_command("agentstore", "show", sid, stdout=out)
    text = out.getvalue()
    assert f"{short_id(ask.id)} = 'start'" in text
    assert f"{ask.id[:8]} = " not in text

    logs = LogStore()
    try:
        session = logs.create({"cwd": "/repo"})
        entry = logs.append(session.id, {"type": "info", "name": "x"})
        logs.update_ref("demo/ref", None, RefTarget(session=session.id, entry=entry))
    finally:
        logs.close()
    out = StringIO()
    call_command("agentstore", "refs", stdout=out)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("demo/ref"))
    assert short_id(entry) in row.split()
    assert entry[:19] not in row

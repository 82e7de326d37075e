"""The log store's demo data: created through the store, idempotent."""

from __future__ import annotations

import pytest

from agentstore.demo import log as demo
from agentstore.models import Entry, RefLog
from agentstore.stores import LogStore

pytestmark = pytest.mark.django_db


def test_demo_seed_is_idempotent() -> None:
    first = demo.seed(None)
    assert first[0].startswith("Created")
    second = demo.seed(None)
    assert second[0].endswith("already exists")
    assert Entry.objects.filter(session_id=demo.SESSION_ID).count() == 6
    assert RefLog.objects.filter(name=demo.REF).count() == 1
    store = LogStore(read_only=True)
    session = store.read(demo.SESSION_ID)
    assert session.name() == "Lisbon day trip"
    assert store.resolve_ref(demo.REF).session == demo.SESSION_ID
    # the leaf label chose the second answer; the name was appended under it
    leaf = session.entry(session.leaf)
    assert leaf is not None and leaf.type == "info"
    assert "LX Factory" in session.entry(leaf.parent or "").line  # type: ignore[union-attr]
    assert LogStore().lock_holder(demo.SESSION_ID) is None  # the seed released its hold

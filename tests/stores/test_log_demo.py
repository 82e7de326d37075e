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
    assert Entry.objects.filter(session_id=demo.SESSION_ID).count() == 12
    assert RefLog.objects.filter(name=demo.REF).count() == 1
    store = LogStore(read_only=True)
    session = store.read(demo.SESSION_ID)
    assert session.name() == "Lisbon day trip"
    assert store.resolve_ref(demo.REF).session == demo.SESSION_ID
    # the leaf label chose the second answer; the name was appended under it
    leaf = session.entry(session.leaf)
    assert leaf is not None and leaf.type == "info"
    assert any("LX Factory" in e.line for e in session.path(leaf.id))
    assert not any("Alfama" in e.line for e in session.path(leaf.id))
    assert LogStore().lock_holder(demo.SESSION_ID) is None  # the seed released its hold
    session.verify()  # every recorded request hash matches the format's context rules


def test_demo_seeds_a_live_hold_and_takes_it_again_after_a_break() -> None:
    demo.seed(None)
    holder = LogStore().lock_holder(demo.HELD_ID)
    assert holder is not None and (holder.host, holder.pid) == demo.HELD_BY
    assert LogStore().break_lock(demo.HELD_ID)
    demo.seed(None)
    again = LogStore().lock_holder(demo.HELD_ID)  # the seed takes the hold again
    assert again is not None and (again.host, again.pid) == demo.HELD_BY


def test_demo_dashboard_has_no_expired_lease() -> None:
    from agentstore.demo import seed_all
    from agentstore.selectors.admin_views import dashboard
    from agentstore.stores.base import utc_now

    seed_all(None)
    board = dashboard(utc_now())
    assert board.expired_leases == 0 and board.active_holds >= 1

"""Every model has a read-only changelist that costs the same few queries however big it is."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentstore.admin.mixins import CappedCountPaginator, ReadOnlyAdmin
from tests.admin.seed import World, seed_world

pytestmark = pytest.mark.django_db

MODELS = sorted(model._meta.model_name for model in apps.get_app_config("agentstore").get_models())
# Document keeps the stock namespace filter (a DISTINCT over a small table); the worker
# page adds one grouped query for the queue depths above the list.
QUERIES = dict.fromkeys(MODELS, 4) | {"document": 5, "worker": 5}


def test_every_model_is_registered_read_only() -> None:
    for model in apps.get_app_config("agentstore").get_models():
        model_admin = admin.site._registry[model]
        assert isinstance(model_admin, ReadOnlyAdmin), model
        assert model_admin.show_full_result_count is False
        assert model_admin.show_facets is admin.ShowFacets.NEVER
        assert model_admin.paginator is CappedCountPaginator


@pytest.mark.parametrize("name", MODELS)
def test_changelist_query_count_does_not_grow(
    admin_client: Client, world: World, name: str
) -> None:
    url = reverse(f"admin:agentstore_{name}_changelist")
    admin_client.get(url)  # warm the session/user caches of the client
    with CaptureQueriesContext(connection) as first:
        response = admin_client.get(url)
    assert response.status_code == 200
    seed_world(cwd="/repo/second")  # twice the rows of every table
    with CaptureQueriesContext(connection) as second:
        assert admin_client.get(url).status_code == 200
    # session + user, one capped COUNT, one page of rows — no N+1, no DISTINCT scans.
    assert len(first) == len(second) == QUERIES[name], [q["sql"] for q in second]
    counts = [
        q["sql"]
        for q in second
        if "COUNT(" in q["sql"].upper() and "GROUP BY" not in q["sql"].upper()  # queue depths
    ]
    assert counts, "the page counts its rows"
    assert all("LIMIT 10001" in sql for sql in counts), counts
    assert not any("DISTINCT" in q["sql"] for q in second if name != "document")


def test_search_and_filters(admin_client: Client, world: World) -> None:
    url = reverse("admin:agentstore_session_changelist")
    page = admin_client.get(url, {"q": world.loop_id}).content.decode()
    assert world.loop_id[:20] in page and world.tree_id[:20] not in page
    entries = admin_client.get(
        reverse("admin:agentstore_entry_changelist"),
        {"session__id__exact": world.tree_id, "type__exact": "compaction"},
    ).content.decode()
    assert "We chose plan B." in entries and "Plan the refactor" not in entries
    tasks = admin_client.get(
        reverse("admin:agentstore_task_changelist"), {"lease": "expired"}
    ).content.decode()
    assert world.tool_task_id[:19] in tasks and world.agent_task_id[:19] not in tasks
    assert "(expired)" in tasks


def test_entry_range_from_a_folded_run_is_in_seq_order(admin_client: Client, world: World) -> None:
    response = admin_client.get(
        reverse("admin:agentstore_entry_changelist"),
        {"session__id__exact": world.tree_id, "seq__gte": 14, "seq__lte": 16},
    )
    page = response.content.decode()
    assert page.index("step 3") < page.index("step 4") < page.index("step 5")
    assert "step 6" not in page and "step 2" not in page


def test_capped_paginator_counts_at_most_cap_plus_one(world: World) -> None:
    from agentstore.models import Entry

    paginator = CappedCountPaginator(Entry.objects.order_by("id"), 10)
    paginator.cap = 5
    assert paginator.count == 6
    assert Entry.objects.count() > 6


@pytest.mark.parametrize("name", ["session", "entry", "task", "grant", "holder"])
def test_nothing_can_be_added_or_changed(admin_client: Client, world: World, name: str) -> None:
    assert admin_client.get(reverse(f"admin:agentstore_{name}_add")).status_code == 403
    changelist = admin_client.get(reverse(f"admin:agentstore_{name}_changelist")).content.decode()
    assert "delete_selected" not in changelist


def test_session_change_page_is_read_only(admin_client: Client, world: World) -> None:
    url = reverse("admin:agentstore_session_change", args=[world.tree_id])
    response = admin_client.post(url, {"name": "renamed"})
    assert response.status_code == 403
    from agentstore.models import Session

    assert Session.objects.get(pk=world.tree_id).name == "admin tour"

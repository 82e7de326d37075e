"""``/refs`` and ``/ref-log/{name}`` read one bounded page in SQL (decision records 0033 and 0013).

Pages walked through their ``next`` links cover every visible ref exactly once
(10,000 refs); a prefix is a byte-order range (``_`` is not a wildcard, case
counts, non-ASCII is ordered by bytes on both databases); hostile ``after`` and
``limit`` values answer 400 in the one error shape; other users' refs and log
rows never show; and the statements that read a page carry ``LIMIT``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agentstore.models import Ref, RefLog
from agentstore.selectors.sessions import sessions_visible_to
from agentstore.stores import LogStore
from agentstore.stores.ref_queries import prefix_upper, ref_log_rows, refs_under
from agentstore.types import RefTarget
from tests.api.conftest import API, assert_error

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, tzinfo=UTC)
ALPHABET = "abcXYZ019._-"


def log_of(user: Any) -> str:
    return LogStore().create({"cwd": "/refs"}, owner=user).id


def seed(names: list[str], session_id: str) -> None:
    """Ref rows straight into the table: 10,000 compare-and-swaps would take minutes."""
    Ref.objects.bulk_create(
        [Ref(name=n, session_id=session_id, updated_at=NOW) for n in names], batch_size=1000
    )


def random_names(count: int, rng: random.Random, stem: str = "") -> list[str]:
    """``count`` distinct valid names of one to three segments."""
    found: set[str] = set()
    while len(found) < count:
        segments = [
            "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6)))
            for _ in range(rng.randint(1, 3))
        ]
        if any(s in {".", ".."} for s in segments):
            continue
        found.add(stem + "/".join(segments))
    return sorted(found)


def walk(client: APIClient, url: str) -> tuple[list[dict[str, Any]], int, int]:
    """Every result through ``next`` links; the counts seen and the number of pages."""
    results: list[dict[str, Any]] = []
    pages = 0
    counts: set[int] = set()
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        assert body["previous"] is None
        results += body["results"]
        counts.add(body["count"])
        pages += 1
        url = body["next"]
    assert len(counts) == 1
    return results, counts.pop(), pages


def test_pages_cover_every_ref_exactly_once(
    api: APIClient, bob_api: APIClient, alice: Any, bob: Any
) -> None:
    rng = random.Random(270)
    mine = random_names(10_000, rng)
    theirs = sorted(set(random_names(600, rng)) - set(mine))
    seed(mine, log_of(alice))
    seed(theirs, log_of(bob))

    results, count, pages = walk(api, f"{API}/refs?limit=200")
    names = [r["name"] for r in results]
    # Byte order: code-point order is UTF-8 byte order, on SQLite and PostgreSQL alike.
    assert names == sorted(mine)
    assert count == 10_000 and pages == 50

    # The collections' page_size works the same way (and is capped, not refused).
    results, count, pages = walk(api, f"{API}/refs?page_size=100000")
    assert [r["name"] for r in results] == sorted(mine) and pages == 50

    theirs_seen, their_count, _ = walk(bob_api, f"{API}/refs?limit=200")
    assert [r["name"] for r in theirs_seen] == theirs and their_count == len(theirs)

    # A prefix pages alike: the names under it, each once.
    under = [n for n in mine if n.startswith("a")]
    results, count, _ = walk(api, f"{API}/refs?prefix=a&limit=37")
    assert [r["name"] for r in results] == under and count == len(under)


def test_after_need_not_be_a_name_and_never_reveals_one(
    api: APIClient, alice: Any, bob: Any
) -> None:
    seed(["a/1", "c/1"], log_of(alice))
    seed(["b/1"], log_of(bob))
    # After bob's name: alice's listing goes on from there, and bob's ref is not in it.
    body = api.get(f"{API}/refs?after=a/1").json()
    assert [r["name"] for r in body["results"]] == ["c/1"] and body["count"] == 2
    assert [r["name"] for r in api.get(f"{API}/refs?after=b").json()["results"]] == ["c/1"]
    assert api.get(f"{API}/refs?after=z").json()["results"] == []


def test_prefix_is_a_byte_order_range(api: APIClient, alice: Any) -> None:
    names = ["a_b/1", "aXb/1", "a_", "A_b/2", "a_b2", "a-b", "a.b", "a/b", "ab"]
    seed(names, log_of(alice))

    def listed(prefix: str) -> list[str]:
        body = api.get(f"{API}/refs", {"prefix": prefix}).json()
        return [r["name"] for r in body["results"]]

    # ``_`` is a character, not LIKE's wildcard; case counts.
    assert listed("a_") == ["a_", "a_b/1", "a_b2"]
    assert listed("a_b") == ["a_b/1", "a_b2"]
    assert listed("A") == ["A_b/2"]
    assert listed("a") == sorted(n for n in names if n.startswith("a"))
    # The upper bound is the prefix's last character bumped: "-" < "." < "/".
    assert listed("a-") == ["a-b"] and listed("a.") == ["a.b"] and listed("a/") == ["a/b"]


@pytest.mark.parametrize("prefix", ["a%", "%", "é", "a b", "a" * 201, "a\\b"])
def test_prefixes_outside_the_name_grammar_are_refused(api: APIClient, prefix: str) -> None:
    error = assert_error(api.get(f"{API}/refs", {"prefix": prefix}), 400, "ref_name")
    assert error["details"]["field"] == "prefix"


def test_the_range_is_byte_order_for_any_text(alice: Any) -> None:
    """The selector's range and order on names the grammar refuses: ``%``, ``_``, non-ASCII."""
    names = ["%", "%a", "_", "_a", "e", "e/1", "é", "é/1", "éa", "f", "ÿ", "中", "中文"]
    names += ["😀", "😀x"]
    session = log_of(alice)
    seed(names, session)
    assert [r.name for r in refs_under()] == sorted(names)
    for prefix in ["%", "_", "é", "中", "😀", "e"]:
        found = [r.name for r in refs_under(prefix)]
        assert found == sorted(n for n in names if n.startswith(prefix)), prefix
    assert [r.name for r in refs_under(after="é/1")] == sorted(n for n in names if n > "é/1")


def test_prefix_upper() -> None:
    assert prefix_upper("") is None
    assert prefix_upper("ab") == "ac"
    assert prefix_upper("a/") == "a0"
    assert prefix_upper("a\U0010ffff") == "b"
    assert prefix_upper("\U0010ffff") is None
    assert prefix_upper("\ud7ff") == "\ue000"


HOSTILE_REFS = [
    {"limit": "0"},
    {"limit": "-1"},
    {"limit": "201"},
    {"limit": "abc"},
    {"limit": "1e3"},
    {"limit": "9" * 40},
    {"page_size": "0"},
    {"page_size": "x"},
    {"page": "2"},
    {"after": "a\x00b"},
    {"after": "x" * 300},
]


@pytest.mark.parametrize("query", HOSTILE_REFS)
def test_hostile_paging_of_refs_is_400(api: APIClient, alice: Any, query: dict[str, str]) -> None:
    seed(["a/1"], log_of(alice))
    error = assert_error(api.get(f"{API}/refs", query), 400, "validation_error")
    assert error["details"]["field"] == next(iter(query))


@pytest.mark.parametrize("after", ["a b", "é", "a%", "x" * 201, "a\\b"])
def test_an_after_outside_the_name_grammar_is_400(api: APIClient, after: str) -> None:
    error = assert_error(api.get(f"{API}/refs", {"after": after}), 400, "ref_name")
    assert error["details"]["field"] == "after"


HOSTILE_LOG = [
    {"after": "-1"},
    {"after": "abc"},
    {"after": str(2**63)},
    {"after": "1.5"},
    {"limit": "0"},
    {"limit": "1001"},
    {"limit": "x"},
    {"page": "3"},
]


@pytest.mark.parametrize("query", HOSTILE_LOG)
def test_hostile_paging_of_the_ref_log_is_400(
    api: APIClient, alice: Any, query: dict[str, str]
) -> None:
    LogStore().update_ref("r", None, RefTarget(session=log_of(alice)))
    error = assert_error(api.get(f"{API}/ref-log/r", query), 400, "validation_error")
    assert error["details"]["field"] == next(iter(query))


def test_the_ref_log_pages_newest_first_and_hides_other_users_rows(
    api: APIClient, bob_api: APIClient, staff_api: APIClient, alice: Any, bob: Any
) -> None:
    store = LogStore()
    mine, other = log_of(alice), log_of(bob)
    # Bob held the name first; then he deleted it and alice took it, many times.
    store.update_ref("shared", None, RefTarget(session=other), "bob's")
    store.update_ref("shared", RefTarget(session=other), None, "bob let go")
    for index in range(12):
        store.update_ref("shared", None, RefTarget(session=mine), f"set {index}")
        if index < 11:
            store.update_ref("shared", RefTarget(session=mine), None, f"unset {index}")
    reasons = [r.reason for r in store.ref_log("shared")]
    assert len(reasons) == 25 and reasons[-2:] == ["bob let go", "bob's"]

    results, count, pages = walk(api, f"{API}/ref-log/shared?limit=4")
    assert [r["reason"] for r in results] == reasons[:-2]  # bob's rows stay his
    assert count == len(reasons) - 2 and pages == -(-count // 4)
    every, staff_count, _ = walk(staff_api, f"{API}/ref-log/shared?limit=3")
    assert [r["reason"] for r in every] == reasons and staff_count == len(reasons)
    # Bob does not hold the name now: its history is not his to read.
    assert_error(bob_api.get(f"{API}/ref-log/shared"), 404, "no_ref")
    # An after past the newest row starts from the newest; one below every row is empty.
    top = store.ref_log("shared", limit=1)[0].position
    beyond = api.get(f"{API}/ref-log/shared?after={top + 100}").json()
    assert beyond["results"][0]["reason"] == reasons[0]
    assert api.get(f"{API}/ref-log/shared?after=0").json()["results"] == []


def test_staff_see_dangling_refs_users_do_not(
    api: APIClient, staff_api: APIClient, alice: Any
) -> None:
    sid = log_of(alice)
    LogStore().update_ref("gone", None, RefTarget(session=sid))
    LogStore().delete(sid)
    assert api.get(f"{API}/refs").json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }
    assert [r["name"] for r in staff_api.get(f"{API}/refs").json()["results"]] == ["gone"]


def test_sqlite_reads_a_users_page_through_the_name_index(alice: Any) -> None:
    """With the visibility rule too, a page is a walk of the name index, not a sort."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query plan")
    page = refs_under("p/", after="p/1", sessions=sessions_visible_to(alice))[:50]
    sql, params = page.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
    assert "sqlite_autoindex_agentstore_ref_1 (name>? AND name<?)" in plan, plan
    assert "TEMP B-TREE" not in plan, plan


def _ref_selects(queries: Any, table: str) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if f'FROM "{table}"' in q["sql"] and "COUNT(" not in q["sql"].upper()
    ]


def test_each_page_is_one_limited_statement(
    api: APIClient, staff_api: APIClient, alice: Any
) -> None:
    seed([f"n/{i:05d}" for i in range(500)], log_of(alice))
    for client in (api, staff_api):
        with CaptureQueriesContext(connection) as queries:
            body = client.get(f"{API}/refs?prefix=n/&after=n/00100&limit=20").json()
        assert [r["name"] for r in body["results"]][:1] == ["n/00101"]
        selects = _ref_selects(queries, Ref._meta.db_table)
        assert len(selects) == 1 and "LIMIT 21" in selects[0], selects
        if connection.vendor == "postgresql":
            assert 'COLLATE "C"' in selects[0]

    store = LogStore()
    sid = log_of(alice)
    store.update_ref("h", None, RefTarget(session=sid), "0")
    for index in range(1, 30):
        store.update_ref("h", RefTarget(session=sid), None, f"{index}d")
        store.update_ref("h", None, RefTarget(session=sid), f"{index}c")
    with CaptureQueriesContext(connection) as queries:
        body = api.get(f"{API}/ref-log/h?limit=5").json()
    assert len(body["results"]) == 5 and body["count"] == 59
    selects = _ref_selects(queries, RefLog._meta.db_table)
    assert len(selects) == 1 and "LIMIT 6" in selects[0], selects


@pytest.mark.skipif(
    connections["default"].vendor != "postgresql", reason="the plan of PostgreSQL's index"
)
def test_postgresql_serves_the_range_and_order_from_the_primary_key(alice: Any) -> None:
    seed([f"p/{i:05d}" for i in range(2000)], log_of(alice))
    with connection.cursor() as cursor:
        # Whatever the (unanalysed) statistics say: if the primary key could
        # not give the rows in byte order, a Sort would still be planned.
        for knob in ("seqscan", "bitmapscan", "sort"):
            cursor.execute(f"SET LOCAL enable_{knob} = off")
    for sessions in (None, sessions_visible_to(alice)):
        page = refs_under("p/0", after="p/00010", sessions=sessions)[:50]
        sql, params = page.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        # The index gives the rows in order: no sort of the matching rows, and
        # the range and the keyset are index conditions.
        assert "Index Scan using agentstore_ref_pkey" in plan and "Sort" not in plan, plan
        assert "Index Cond: (((name)::text >= " in plan, plan
    log = ref_log_rows("p/00001", after=10)[:50]
    sql, params = log.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "agentstore_reflog_name" in plan and "Sort" not in plan, plan


def test_other_users_never_see_a_ref_through_any_page(
    api: APIClient, bob_api: APIClient, alice: Any, bob: Any
) -> None:
    User = get_user_model()
    carol = User.objects.create_user("carol", password="pw-carol-123")
    seed([f"x/{i:03d}" for i in range(0, 300, 2)], log_of(alice))
    seed([f"x/{i:03d}" for i in range(1, 300, 2)], log_of(bob))
    seed(["x/carol"], log_of(carol))
    for client, parity in ((api, 0), (bob_api, 1)):
        results, count, _ = walk(client, f"{API}/refs?prefix=x/&limit=7")
        assert count == 150
        assert [int(r["name"][2:]) % 2 for r in results] == [parity] * 150

"""LangGraph's own checkpointer conformance suite, run against AgentStoreSaver.

``langgraph-checkpoint-conformance`` (a test dependency) is LangGraph's contract
for checkpointers: put/put_writes/get_tuple/list/delete_thread (base) and
delete_for_runs/copy_thread/prune (extended). It drives the async methods, so
this also covers the saver's async twins (one hop per call). The suite runs on the
backend the test session uses: ``./scripts/test`` runs it on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.conformance.report import CapabilityReport

from agentstore.integrations.langgraph import AgentStoreSaver

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = "langgraph.checkpoint.conformance.spec"


@checkpointer_test(name="AgentStoreSaver")
async def agentstore_saver() -> AsyncIterator[AgentStoreSaver]:
    yield AgentStoreSaver()


async def _validate() -> CapabilityReport:
    return await validate(agentstore_saver)


def test_conformance_base_and_extended_capabilities_all_pass() -> None:
    report = asyncio.run(_validate())
    results = report.results
    failures = {cap: r.failures for cap, r in results.items() if not r.passed}
    assert failures == {}, failures
    for capability in BASE_CAPABILITIES | EXTENDED_CAPABILITIES:
        result = results[capability.value]
        # Detected (the method is overridden) and actually run, not skipped.
        assert result.detected, capability
        assert result.tests_passed > 0 and result.tests_failed == 0, capability
    assert report.passed_all_base()
    # Every spec test of every capability ran (none skipped or lost).
    spec_tests = sum(
        len(getattr(importlib.import_module(f"{SPEC}.test_{cap.value}"), name))
        for cap in BASE_CAPABILITIES | EXTENDED_CAPABILITIES
        for name in dir(importlib.import_module(f"{SPEC}.test_{cap.value}"))
        if name.startswith("ALL_") and name.endswith("_TESTS")
    )
    assert sum(r.tests_passed for r in results.values()) == spec_tests

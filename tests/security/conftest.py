"""Fixtures of the security suite: the API tests' users and clients."""

from __future__ import annotations

from tests.api.conftest import alice, anon, api, bob, bob_api, staff, staff_api  # noqa: F401

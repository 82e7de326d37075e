"""Fixtures of the admin tests: a seeded world (through the stores) and the admin client."""

from __future__ import annotations

import pytest

from tests.admin.seed import World, seed_world


@pytest.fixture
def world(db: None) -> World:
    return seed_world()

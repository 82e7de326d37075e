"""Template tags of agentstore's admin pages."""

from __future__ import annotations

"""Value objects of the log area (filled in by the issue that builds it)."""

from __future__ import annotations

__all__: list[str] = []

"""Session file formats: agentsession JSONL (``formats.agentsession``) and pi JSONL."""

from __future__ import annotations

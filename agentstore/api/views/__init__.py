"""The API's viewsets, one module per resource; ``urls.py`` registers them."""

from __future__ import annotations

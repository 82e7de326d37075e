"""ASGI entry point of the demo project.

Persistent database connections are turned off before Django starts: under
ASGI each request runs in its own thread, so they would only leak
(``project.database_url.for_asgi``; docs/operations.md, "Scaling out").
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

from project.database_url import for_asgi

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
for_asgi(settings.DATABASES)
application = get_asgi_application()

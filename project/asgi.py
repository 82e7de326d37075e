"""ASGI entry point of the demo project.

Persistent database connections are turned off before Django starts: under
ASGI each request runs in its own thread, so they would only leak
(``project.database_url.for_asgi``; docs/operations.md, "Scaling out").
agentstore's handler refuses an oversized or non-JSON API body before reading
it, where Django's would first spool it to a temporary file
(``agentstore.asgi``; docs/operations.md, "Request limits").
"""

from __future__ import annotations

import os

from django.conf import settings

from agentstore.asgi import get_asgi_application
from project.database_url import for_asgi

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
for_asgi(settings.DATABASES)
application = get_asgi_application()

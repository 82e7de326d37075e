"""Settings of the agentstore demo project (also used by the test suite).

The database is a SQLite file in WAL mode by default; set ``DATABASE_URL`` to
use another file or PostgreSQL (see ``project/database_url.py``). Not for
production: deploy with ``project.settings_production``, which refuses to start
without a real secret key and passes ``manage.py check --deploy``
(docs/operations.md "Production checklist"). ``DEBUG`` is off unless
``DJANGO_DEBUG=1`` (``scripts/demo`` sets it), so no deployment gets debug pages
by accident.
"""

from __future__ import annotations

import os
from pathlib import Path

from project.database_url import parse_database_url, sqlite_database

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

#: The demo's fallback key; ``project.settings_production`` refuses it.
DEMO_SECRET_KEY = "agentstore-demo-insecure-key-change-me"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEMO_SECRET_KEY)
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    # Swagger UI's JavaScript and CSS served from this site, so the UI works offline.
    "drf_spectacular_sidecar",
    "agentstore",
    "project",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": (
        parse_database_url(DATABASE_URL, base_dir=BASE_DIR)
        if DATABASE_URL
        else sqlite_database(
            VAR_DIR / "agentstore.sqlite3", test_path=VAR_DIR / "test_agentstore.sqlite3"
        )
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REST_FRAMEWORK = {
    # Token first: an unauthenticated API call then answers 401 with
    # "WWW-Authenticate: Token" (DRF takes the header from the first class).
    # agentstore's subclass does DRF's token lookup with one lean statement.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agentstore.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "agentstore.api.exceptions.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "agentstore API",
    "DESCRIPTION": "Sessions, entry trees, steps, approvals, holds, refs and durable tasks.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "TaskStateEnum": "agentstore.api.task_serializers.STATE_CHOICES",
        "TerminalTaskStateEnum": "agentstore.api.task_serializers.TERMINAL_CHOICES",
    },
}

AGENTSTORE: dict[str, object] = {
    # The demo's runner (docs/runs.md): manage.py agentstore start-run weather --input "…".
    "RUNNERS": {"weather": "agentstore.demo.runners.weather"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentstore": {"handlers": ["console"], "level": "WARNING"}},
}

# Django's task framework (django.tasks on Django 6, the django-tasks backport on
# Django 5.2) stores @task calls in agentstore's task table; `manage.py agentstore
# worker` runs them (docs/tasks.md "Running tasks"). An empty QUEUES allows any queue.
TASKS = {
    "default": {
        "BACKEND": "agentstore.tasks.backends.AgentStoreBackend",
        "QUEUES": [],
        "OPTIONS": {"MAX_ATTEMPTS": 1},
    }
}

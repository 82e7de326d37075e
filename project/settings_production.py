"""Production settings: the demo settings, locked down from the environment.

    DJANGO_SETTINGS_MODULE=project.settings_production
    DJANGO_SECRET_KEY=…            # required: 50+ characters, never the demo key
    DJANGO_ALLOWED_HOSTS=agents.example.com,agents.internal   # required
    DATABASE_URL=postgres://…      # or a sqlite:/// file on a local disk

``manage.py check --deploy`` passes with these settings (a test runs it). A
missing or weak secret key, or no allowed hosts, refuses to start
(``ImproperlyConfigured``) instead of serving with a default nobody chose.
Optional: ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma-separated
``https://host`` origins for browser writes behind a proxy),
``DJANGO_SECURE_PROXY_SSL_HEADER=1`` (trust ``X-Forwarded-Proto: https`` from
a TLS-terminating proxy you run), ``DJANGO_SECURE_SSL_REDIRECT=0`` (the proxy
redirects already), ``DJANGO_HSTS_SECONDS`` (default one year),
``DJANGO_HSTS_PRELOAD=1`` (a one-way commitment for the whole domain), and
``DJANGO_STATIC_ROOT``. docs/operations.md "Production checklist" says the rest.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from project.settings import *  # noqa: F403 - the demo settings are the base
from project.settings import DEMO_SECRET_KEY


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


DEBUG = False

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if len(SECRET_KEY) < 50 or SECRET_KEY == DEMO_SECRET_KEY or len(set(SECRET_KEY)) < 5:
    raise ImproperlyConfigured(
        "Set DJANGO_SECRET_KEY to a random value of 50+ characters (for example "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`); "
        "production settings never fall back to the demo key."
    )

ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS")
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "Set DJANGO_ALLOWED_HOSTS to the comma-separated host names this site answers to."
    )
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# TLS: cookies only over HTTPS, HTTP redirected, browsers told to stay on HTTPS.
if _env_flag("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = _env_flag("DJANGO_SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_flag("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = _env_flag("DJANGO_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if not SECURE_HSTS_PRELOAD:
    # Preloading is opt-in (DJANGO_HSTS_PRELOAD=1): once a domain is on the
    # browsers' list it cannot serve plain HTTP for months, subdomains included.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]

if os.environ.get("DJANGO_STATIC_ROOT"):
    STATIC_ROOT = Path(os.environ["DJANGO_STATIC_ROOT"])

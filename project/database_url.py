"""Turn the ``DATABASE_URL`` environment variable into a Django ``DATABASES`` entry.

    sqlite:///var/agentstore.sqlite3     a path relative to the working directory
    sqlite:////srv/agentstore.sqlite3    an absolute path (four slashes)
    postgres://user:pass@host:5432/name  PostgreSQL (``postgresql://`` too)
    postgres://…/name?pool=1             … with Django's psycopg connection pool
    postgres://…/name?pool_min_size=2&pool_max_size=8&pool_timeout=10

SQLite databases always get agentstore's recommended options (WAL, IMMEDIATE,
a busy timeout); see docs/operations.md. Under ASGI ``project/asgi.py`` turns
persistent connections off with :func:`for_asgi`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

#: Seconds a connection waits for SQLite's write lock before "database is locked".
SQLITE_TIMEOUT = 20

SQLITE_INIT_COMMAND = (
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "PRAGMA temp_store=MEMORY;"
    "PRAGMA cache_size=-16000"
)


def sqlite_database(path: str | Path, *, test_path: str | Path | None = None) -> dict[str, Any]:
    """Return a ``DATABASES`` entry for the SQLite file at ``path``."""
    config: dict[str, Any] = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": SQLITE_TIMEOUT,
            "init_command": SQLITE_INIT_COMMAND,
        },
        # Closing the last connection checkpoints the WAL; keep connections.
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
    }
    if test_path is not None:
        # A file, not Django's in-memory default: WAL and multi-process tests
        # need a real database file.
        config["TEST"] = {"NAME": str(test_path)}
    return config


#: URL parameters that configure the pool (``pool_<name>`` → psycopg_pool's ``<name>``).
_POOL_SIZES = {"pool_min_size": int, "pool_max_size": int, "pool_timeout": float}


def _pool_options(url: str, options: dict[str, Any]) -> dict[str, Any] | bool | None:
    """Take the pool parameters out of ``options``: ``OPTIONS["pool"]``, or ``None`` for no pool.

    Django's native pool (``OPTIONS["pool"]``, Django ≥ 5.1, ``psycopg[pool]``)
    keeps open connections per process and hands one to each request: see
    docs/operations.md, "Scaling out".
    """
    switch = options.pop("pool", None)
    sizes: dict[str, Any] = {}
    for key, kind in _POOL_SIZES.items():
        if key in options:
            raw = options.pop(key)
            try:
                sizes[key.removeprefix("pool_")] = kind(raw)
            except ValueError:
                raise ImproperlyConfigured(
                    f"DATABASE_URL {url!r}: {key}={raw!r} is not a number"
                ) from None
    if switch is not None and switch.lower() in ("0", "false", "no", "off"):
        return None
    if switch is None and not sizes:
        return None
    return sizes or True


def parse_database_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """Return a ``DATABASES`` entry for ``url``; relative SQLite paths are under ``base_dir``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        raw = unquote(url[len("sqlite://") :]).split("?", 1)[0]
        if not raw.startswith("/") or raw in ("", "/"):
            raise ImproperlyConfigured(
                f"DATABASE_URL {url!r}: a SQLite URL needs a path, e.g. sqlite:///db.sqlite3"
            )
        # sqlite:///rel/path -> "rel/path"; sqlite:////abs/path -> "/abs/path".
        path = Path(raw[1:])
        if not path.is_absolute():
            path = base_dir / path
        return sqlite_database(path, test_path=path.with_name(f"test_{path.name}"))
    if scheme in ("postgres", "postgresql", "pgsql"):
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(
                f"DATABASE_URL {url!r}: a PostgreSQL URL needs a database name"
            )
        options: dict[str, Any] = dict(parse_qsl(parts.query))
        pool = _pool_options(url, options)
        if pool is not None:
            options["pool"] = pool
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "OPTIONS": options,
            # A pooled connection goes back to the pool after each request
            # (Django refuses persistent connections with a pool).
            "CONN_MAX_AGE": 0 if pool is not None else 60,
            "CONN_HEALTH_CHECKS": pool is None,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL {url!r}: unsupported scheme {parts.scheme!r} (use sqlite:// or postgres://)"
    )


def for_asgi(databases: dict[str, dict[str, Any]]) -> None:
    """Close each unpooled connection at the end of its request: what ASGI needs.

    Under ASGI Django serves every request in a thread of its own (one per
    request context), so a persistent connection (``CONN_MAX_AGE`` > 0) is
    never reused by a later request and never closed by Django either: it
    stays open until the garbage collector finds it. A uvicorn process
    serving 200 follow streams held dozens of such connections and ran
    PostgreSQL out of ``max_connections`` (docs/operations.md, "Scaling
    out"; Django's own advice is the same: under ASGI, no persistent
    connections — use a pool). Pooled aliases already use ``CONN_MAX_AGE=0``.
    """
    for config in databases.values():
        if not config.get("OPTIONS", {}).get("pool"):
            config["CONN_MAX_AGE"] = 0

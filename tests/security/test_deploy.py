"""A deployment never gets the demo's defaults by accident (issue 13, "Also").

``project.settings_production`` passes ``manage.py check --deploy`` with no
warning left, and refuses to start without a real secret key or allowed hosts;
the demo settings keep ``DEBUG`` off unless ``DJANGO_DEBUG=1`` and fail
``check --deploy``. Each case runs ``manage.py`` in a fresh process, as an
operator would.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

_CLEARED = ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "project.settings_production",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "agents.example.com",
}


def test_check_deploy_passes_with_the_production_settings() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"DJANGO_SECRET_KEY": ""}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY": "agentstore-demo-insecure-key-change-me"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY": "a" * 60}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_ALLOWED_HOSTS": ""}, "DJANGO_ALLOWED_HOSTS"),
    ],
)
def test_production_settings_refuse_to_start_on_defaults(
    override: dict[str, str], message: str
) -> None:
    result = manage("check", **{**PRODUCTION, **override})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


def test_the_demo_settings_are_not_deployable_and_debug_is_off_by_default() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0
    assert "security.W009" in result.stderr  # the demo key
    debug = manage("shell", "-c", "from django.conf import settings; print(settings.DEBUG)")
    assert debug.stdout.strip().splitlines()[-1] == "False", debug.stderr
    on = manage(
        "shell", "-c", "from django.conf import settings; print(settings.DEBUG)", DJANGO_DEBUG="1"
    )
    assert on.stdout.strip().splitlines()[-1] == "True", on.stderr

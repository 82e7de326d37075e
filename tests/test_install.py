"""The README's "Add agentstore to an existing project", followed literally, gives a working API.

A new user's report: the steps left ``rest_framework.authtoken`` out (every
token request a 500), never said how to make a token, and left the API on the
new project's ``AllowAny`` (anonymous writes). This test reads the README's
blocks themselves — the settings, the URLconf, each ``python manage.py`` line
— applies them to a fresh ``django-admin startproject``, and then makes the
requests a user would: a token from ``drf_create_token`` works, anonymous
writes are refused and write nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

SECTION = "## Add agentstore to an existing project"


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the README's install section, in order."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def _run(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


#: What the requests check, run in the new project (the test client, no server).
PROBE = """
import json
from django.test import Client
from django.test.utils import setup_test_environment
from agentstore.models import Session
setup_test_environment()
token, anon = Client(HTTP_AUTHORIZATION="Token " + TOKEN), Client()
out = {}
r = token.post("/api/v1/sessions", {"cwd": "/repo"}, content_type="application/json")
out["create"] = [r.status_code, r.json().get("owner")]
out["list"] = [token.get("/api/v1/sessions").status_code]
for path, body in [("/api/v1/sessions", {"cwd": "/x"}), ("/api/v1/log-sessions", {"header": {}})]:
    r = anon.post(path, body, content_type="application/json")
    out[path] = [r.status_code, r.json()["error"]["code"]]
out["anon-list"] = [anon.get("/api/v1/sessions").status_code]
out["sessions"] = Session.objects.count()
print("PROBE " + json.dumps(out))
"""


def test_the_readme_install_steps_give_a_working_token_api(tmp_path: Path) -> None:
    blocks = readme_blocks()
    settings_block, urls_block = (text for lang, text in blocks if lang == "python")
    commands = [
        line.split("#", 1)[0].strip()
        for lang, text in blocks
        if lang == "bash"
        for line in text.splitlines()
        if line.startswith("python manage.py")
    ]
    # The blocks' "..." is "what your project already has".
    assert "    ...,\n" in settings_block and "[...," in urls_block
    settings_block = settings_block.replace("    ...,\n", "    *INSTALLED_APPS,\n", 1)
    urls_block = urls_block.replace("[...,", "[*urlpatterns,", 1)

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL"))},
        # The worktree's agentstore, not whichever one the venv installed.
        "PYTHONPATH": str(REPO_ROOT),
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "DJANGO_SUPERUSER_PASSWORD": "pw-alice-123",
    }
    _run(tmp_path, "-m", "django", "startproject", "mysite", ".", env=env)
    settings_py = tmp_path / "mysite" / "settings.py"
    settings_py.write_text(settings_py.read_text() + "\n" + settings_block)
    urls_py = tmp_path / "mysite" / "urls.py"
    urls_py.write_text(urls_py.read_text() + "\n" + urls_block)

    token = ""
    for command in commands:
        args = command.removeprefix("python ").split()
        if args[1] == "createsuperuser":
            args += ["--noinput", "--username", "alice", "--email", "alice@example.com"]
        args = ["alice" if arg == "USERNAME" else arg for arg in args]
        if args[1] == "check":
            args += ["--fail-level", "WARNING"]  # no agentstore warning or error left
        output = _run(tmp_path, *args, env=env)
        found = re.search(r"Generated token (\w+) for user alice", output)
        if found:
            token = found.group(1)
    assert {"migrate", "check", "createsuperuser", "drf_create_token"} <= {
        command.split()[2] for command in commands
    }
    assert token, "the README's steps made no token"

    output = _run(tmp_path, "manage.py", "shell", "-c", f"TOKEN = {token!r}\n{PROBE}", env=env)
    probe = json.loads(output.split("PROBE ", 1)[1].splitlines()[0])
    assert probe["create"] == [201, "alice"]
    assert probe["list"] == [200]
    # Token authentication first: 401 with WWW-Authenticate, in the one error shape.
    assert probe["/api/v1/sessions"] == [401, "not_authenticated"]
    assert probe["/api/v1/log-sessions"] == [401, "not_authenticated"]
    assert probe["anon-list"] == [401]
    assert probe["sessions"] == 1  # the token's session only

"""A new user's pass: the README and docs followed literally in a brand-new Django project.

    .venv/bin/python bench/newuser_pass.py           # a Markdown table; exit 1 on a failure
    .venv/bin/python bench/newuser_pass.py --keep    # and keep the project directory

Not a benchmark (nothing is timed; ``bench/run_all.py`` lists it among its helpers). In a
temporary directory it runs ``django-admin startproject mysite .`` and then does what the
docs say, reading their blocks from the files themselves (so a doc that changes is what
is tried): the README's "Add agentstore to an existing project" settings and URLconf
blocks appended as written, each of its ``python manage.py`` lines (``migrate``,
``check``, ``createsuperuser``, ``drf_create_token``, ``agentstore --help``), the system
checks docs/operations.md promises for a project missing ``rest_framework.authtoken`` or
the SQLite options, docs/quickstart.md's transaction-helper snippet, the README's ``curl``
and docs/api.md's append ``curl`` against ``manage.py runserver``, docs/api.md's Python
client example run as written, docs/commands.md's listing, ``show`` and the export →
import round trip (``find … | xargs -0 … import``) compared byte for byte, and the admin's
index and every agentstore changelist through Django's test ``Client``.

``pip install`` is the one step replaced: the checkout is put on ``PYTHONPATH`` and the
interpreter running this script (a venv with agentstore's dependencies) is used, as
``tests/test_install.py`` does. Each step records what the doc says, what happened and
whether that is what the doc promised.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.processes import free_port, wait_serving  # noqa: E402

PY = sys.executable


@dataclass
class Step:
    step: str
    doc: str
    happened: str
    ok: bool


def section(doc: str, heading: str) -> str:
    """The text of ``doc`` under ``heading`` up to the next heading of the same level."""
    text = (ROOT / doc).read_text()
    level = heading.split(" ", 1)[0]
    if heading not in text:
        raise SystemExit(f"{doc} has no {heading!r}: the pass follows the docs, update it")
    return text.split(heading, 1)[1].split(f"\n{level} ", 1)[0]


def blocks(doc: str, heading: str, lang: str) -> list[str]:
    """The fenced ``lang`` blocks of that section, in order."""
    return re.findall(rf"```{lang}\n(.*?)```", section(doc, heading), flags=re.S)


class Project:
    """A fresh ``startproject`` and the commands a user types in it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE"))},
            "PYTHONPATH": str(ROOT),  # the checkout, as `pip install -e .` would give
            "DJANGO_SETTINGS_MODULE": "mysite.settings",
            "DJANGO_SUPERUSER_PASSWORD": "new-user-pw-123",
        }
        self.steps: list[Step] = []

    def run(self, *args: str, settings: str = "", timeout: float = 300) -> tuple[int, str]:
        env = {**self.env, **({"DJANGO_SETTINGS_MODULE": settings} if settings else {})}
        done = subprocess.run(
            list(args), cwd=self.path, env=env, capture_output=True, text=True, timeout=timeout
        )
        return done.returncode, done.stdout + done.stderr

    def manage(self, *args: str, settings: str = "", stdin: str | None = None) -> tuple[int, str]:
        if stdin is None:
            return self.run(PY, "manage.py", *args, settings=settings)
        done = subprocess.run(
            [PY, "manage.py", *args],
            cwd=self.path,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done.returncode, done.stdout + done.stderr

    def record(self, step: str, doc: str, happened: str, ok: bool) -> bool:
        self.steps.append(Step(step, doc, happened, ok))
        return ok

    def shell(self, code: str) -> tuple[int, str]:
        return self.manage("shell", "-c", code)


def tail(text: str, n: int = 160) -> str:
    """The end of a command's output, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= n else "…" + flat[-n:]


def install(p: Project) -> str:
    """startproject, then the README's settings and URLconf blocks and its commands."""
    heading = "## Add agentstore to an existing project"
    code, out = p.run(PY, "-m", "django", "startproject", "mysite", ".")
    p.record("startproject", "an existing project", tail(out) or "created", code == 0)
    settings_block, urls_block = blocks("README.md", heading, "python")
    # "..." in the blocks is "what your project already has".
    settings_py = p.path / "mysite" / "settings.py"
    settings = settings_block.replace("    ...,\n", "    *INSTALLED_APPS,\n", 1)
    settings_py.write_text(settings_py.read_text() + "\n" + settings)
    urls_py = p.path / "mysite" / "urls.py"
    urls_py.write_text(urls_py.read_text() + "\n" + urls_block.replace("[...,", "[*urlpatterns,"))
    p.record(
        "settings and urls",
        "README: INSTALLED_APPS, DATABASES (WAL, IMMEDIATE), REST_FRAMEWORK, AGENTSTORE, urls.py",
        "appended to mysite/settings.py and mysite/urls.py as written",
        "rest_framework.authtoken" in settings and "agentstore.api.urls" in urls_block,
    )
    p.record(
        "pip install",
        "README: pip install agentstore (from a checkout: pip install -e .)",
        "replaced: the checkout on PYTHONPATH in this venv (tests/test_install.py does the same)",
        True,
    )
    commands = [
        line.split("#", 1)[0].strip()
        for text in blocks("README.md", heading, "bash")
        for line in text.splitlines()
        if line.startswith("python manage.py")
    ]
    token = ""
    for command in commands:
        args = command.removeprefix("python manage.py ").split()
        said = f"README: {command}"
        if args[0] == "createsuperuser":
            args += ["--noinput", "--username", "alice", "--email", "alice@example.com"]
        args = ["alice" if a == "USERNAME" else a for a in args]
        code, out = p.manage(*args)
        if args[0] == "check":
            # The README's comment: agentstore's checks speak only when something is wrong.
            strict, out_strict = p.manage("check", "--fail-level", "WARNING")
            quiet = code == 0 and strict == 0 and "agentstore." not in out
            p.record(command, said + " (no agentstore warning)", tail(out_strict), quiet)
            continue
        if args[0] == "drf_create_token":
            found = re.search(r"Generated token (\w+) for user alice", out)
            token = found.group(1) if found else ""
            said += ' → "Generated token <key> for user USERNAME"'
            p.record(command, said, tail(out, 60)[:40] + "…", code == 0 and bool(token))
            continue
        if args[0] == "agentstore" and "--help" in args:
            listed = all(word in out for word in ("ls", "show", "export", "import", "worker"))
            p.record(command, said, tail(out, 120), code == 0 and listed)
            continue
        p.record(command, said, tail(out, 120) or "(no output)", code == 0)
    return token


def checks(p: Project) -> None:
    """The system checks docs/operations.md promises, on projects that get a step wrong."""
    mysite = p.path / "mysite"
    (mysite / "no_authtoken.py").write_text(
        "from mysite.settings import *  # noqa\n"
        "INSTALLED_APPS = [a for a in INSTALLED_APPS if a != 'rest_framework.authtoken']\n"
    )
    code, out = p.manage("check", settings="mysite.no_authtoken")
    p.record(
        "check without authtoken",
        "operations.md: agentstore.E001 when rest_framework.authtoken is missing",
        tail(out, 140),
        code != 0 and "agentstore.E001" in out,
    )
    (mysite / "plain_sqlite.py").write_text(
        "from mysite.settings import *  # noqa\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3',"
        " 'NAME': BASE_DIR / 'db.sqlite3'}}\n"
    )
    code, out = p.manage("check", settings="mysite.plain_sqlite")
    p.record(
        "check with startproject's SQLite",
        "quickstart step 3: agentstore.W001, agentstore.W002 when SQLite is not WAL/IMMEDIATE",
        tail(out, 140),
        "agentstore.W001" in out and "agentstore.W002" in out,
    )
    (mysite / "session_only.py").write_text(
        "from mysite.settings import *  # noqa\n"
        "REST_FRAMEWORK = {**REST_FRAMEWORK, 'DEFAULT_AUTHENTICATION_CLASSES': "
        "['rest_framework.authentication.SessionAuthentication']}\n"
    )
    code, out = p.manage("check", settings="mysite.session_only")
    p.record(
        "check with browser logins only",
        "operations.md: agentstore.W003 when no class can sign in an API client",
        tail(out, 140),
        "agentstore.W003" in out,
    )


def quickstart(p: Project) -> None:
    """docs/quickstart.md's transaction-helper snippet, run as written."""
    (snippet,) = blocks("docs/quickstart.md", "## Using the transaction helpers", "python")
    code, out = p.shell(snippet + "\nprint('COUNT', count)\n")
    found = re.search(r"COUNT (\d+)", out)
    p.record(
        "transaction helpers",
        "quickstart: db.write(..., orm=True) then db.read_only(...) counts it",
        tail(out, 120),
        code == 0 and bool(found) and found is not None and found.group(1) == "1",
    )
    (asgi,) = blocks("docs/operations.md", "## Request limits", "python")
    (p.path / "mysite" / "asgi_doc.py").write_text(asgi)
    code, out = p.shell("import mysite.asgi_doc as m; print('ASGI', callable(m.application))")
    p.record(
        "asgi.py",
        "operations.md: application = agentstore.asgi.get_asgi_application()",
        tail(out, 120),
        code == 0 and "ASGI True" in out,
    )


def http(url: str, token: str, body: dict[str, object] | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    request.add_header("Authorization", f"Token {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()[:200]


def served(p: Project, token: str) -> list[str]:
    """The README's curl, docs/api.md's append curl and Python client, on runserver."""
    port = free_port()
    server = subprocess.Popen(
        [PY, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=p.path,
        env=p.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    made: list[str] = []
    try:
        wait_serving(server, port, token=token, timeout=120)
        base = f"http://127.0.0.1:{port}/api/v1"
        # The README's curl and docs/api.md's, run by curl itself (port and token filled in).
        (readme_curl,) = [
            text
            for text in blocks("README.md", "## Add agentstore to an existing project", "bash")
            if text.startswith("curl")
        ]
        command = readme_curl.replace("<key>", token).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        rc, out = p.run("bash", "-c", "curl -sS -w '\\n%{http_code}' " + command.strip()[5:])
        status = out.strip().rsplit("\n", 1)[-1]
        p.record(
            "curl /sessions", "README: curl with the token lists sessions", status, status == "200"
        )
        # DRF's default permission is AllowAny and the README sets none: the API must
        # still refuse anonymous writes by itself, and store nothing.
        refused = []
        for path, body in [("/sessions", {"cwd": "/x"}), ("/log-sessions", {"header": {}})]:
            request = urllib.request.Request(
                base + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            try:
                urllib.request.urlopen(request, timeout=30)
                refused.append(0)
            except urllib.error.HTTPError as exc:
                refused.append(exc.code)
        rc, out = p.shell(
            "from agentstore.models import Session; print('ROWS', Session.objects.count())"
        )
        rows = re.search(r"ROWS (\d+)", out)
        stored = rows.group(1) if rows else "?"
        p.record(
            "anonymous writes",
            "README: the API requires a signed-in user whatever DEFAULT_PERMISSION_CLASSES",
            f"POST /sessions, /log-sessions without a token: {refused}; sessions stored: {stored}",
            refused == [401, 401] and stored == "0",
        )
        status, session = http(f"{base}/sessions", token, {"cwd": "/repo", "name": "first"})
        sid = session["id"] if isinstance(session, dict) else ""
        made.append(sid)
        (api_curl,) = blocks("docs/api.md", "### Sessions and their trees (TreeStore)", "bash")
        api_curl = api_curl.replace("127.0.0.1:8000", f"127.0.0.1:{port}").strip()
        env = f"TOKEN={token}; SID={sid}; "  # set first: the command line expands them
        rc, out = p.run("bash", "-c", env + "curl -sS -w '\\n%{http_code}' " + api_curl[5:])
        status = out.strip().rsplit("\n", 1)[-1]
        p.record(
            "curl append/message",
            "api.md: POST …/append/message with parent_id null → 201",
            status,
            rc == 0 and status == "201",
        )
        code = blocks("docs/api.md", "### Python client", "python")[0]
        code = code.replace('"http://127.0.0.1:8000/api/v1"', repr(base))
        code = code.replace('token="…"', f"token={token!r}")
        script = p.path / "client_example.py"
        script.write_text(code)
        rc, out = p.run(PY, str(script), timeout=120)
        p.record(
            "Python client example",
            "api.md: a conversation, a compaction, context ending in 'thanks', follow, NotFound",
            tail(out, 160),
            rc == 0 and "'thanks'" in out and "404 no_session" in out,
        )
        loop = http(f"{base}/sessions", token, {"kind": "loop", "model": "gpt-x"})[1]
        loop_id = loop["id"] if isinstance(loop, dict) else ""
        step = {"step_index": 0, "step_type": "user", "content": "What's the weather?"}
        http(f"{base}/sessions/{loop_id}/steps", token, step)
        http(f"{base}/sessions/{loop_id}/grants", token, {"prompt": "run ls?"})
        made.append(loop_id)
        # A task and a workflow, so the admin's task and workflow pages have something.
        http(f"{base}/tasks", token, {"kind": "job", "owner_session_id": sid})
        run = {"owner_session_id": sid, "name": "wf", "source": "run()", "source_hash": "h"}
        http(f"{base}/workflows", token, run)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return made


def commands(p: Project, made: list[str]) -> None:
    """docs/commands.md: ls, show, export/import round trip through files."""
    code, out = p.manage("agentstore", "ls")
    p.record(
        "agentstore ls", "commands.md: sessions of every kind, a table", tail(out, 120), code == 0
    )
    code, out = p.manage("agentstore", "ls", "--json")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    p.record(
        "agentstore ls --json",
        "commands.md: one JSON object per line",
        f"{len(rows)} rows",
        code == 0 and len(rows) >= 3,
    )
    short = made[0][-12:]
    code, out = p.manage("agentstore", "show", short)
    p.record(
        f"agentstore show {short}",
        "commands.md: a unique suffix of 6+ characters names a session",
        tail(out, 120),
        code == 0 and made[0] in out,
    )
    code, out = p.manage("agentstore", "stats")
    p.record("agentstore stats", "commands.md: counts of everything", tail(out, 100), code == 0)
    # commands.md "Moving a project": export --all --out moved/, then find | xargs -0 import.
    (block,) = blocks("docs/commands.md", "## Files", "bash")
    export_line, import_line = (line for line in block.splitlines() if line.strip())
    export_args = export_line.replace("manage.py ", "").replace(" --database old", "").split()
    code, out = p.manage(*export_args)
    files = sorted((p.path / "moved").glob("*.jsonl"))
    before = {f.name: f.read_bytes() for f in files}
    p.record(
        "export --all --out moved/",
        "commands.md: every session into DIR/<id>.jsonl",
        f"{len(files)} files; " + tail(out, 80),
        code == 0 and len(files) >= 3,
    )
    code, out = p.manage("agentstore", "rm", *[f.stem for f in files])
    p.record("agentstore rm", "commands.md: deletes each session", tail(out, 80), code == 0)
    pipeline = import_line.replace("manage.py", f"{PY} manage.py")
    code, out = p.run("bash", "-c", f"set -o pipefail; {pipeline}")
    p.record(
        "import (find | xargs -0)",
        "commands.md: " + import_line.strip(),
        tail(out, 120),
        code == 0,
    )
    shutil.rmtree(p.path / "moved")
    code, out = p.manage(*export_args)
    after = {f.name: f.read_bytes() for f in sorted((p.path / "moved").glob("*.jsonl"))}
    differ = sorted(name for name in before if after.get(name) != before[name])
    p.record(
        "round trip",
        "commands.md: pi v3 byte for byte, agentstore/1 exactly as exported",
        f"{len(after)} files again; differing: {differ or 'none'}",
        code == 0 and not differ and set(after) == set(before),
    )
    # commands.md "Bounds and paths": hostile sources and targets are one line, never a traceback.
    for args, said in [
        (["import", "/dev/zero"], "a device is refused before anything is read"),
        (["import", "moved"], "a directory is refused"),
        (["export", "--all", "--out", "/proc/self"], "--out must be a writable directory"),
    ]:
        code, out = p.manage("agentstore", *args)
        clean = code == 1 and "Traceback" not in out and len(out.strip().splitlines()) <= 2
        p.record(
            f"agentstore {' '.join(args)}", f"commands.md: {said}; exit 1", tail(out, 120), clean
        )
    code, out = p.shell(
        "from agentstore.models import Session\n"
        "print('OWNERS', sorted({s.owner.username for s in Session.objects.all()}))"
    )
    p.record(
        "import --owner alice",
        "commands.md: --owner names the owner in the target",
        tail(out, 80),
        "OWNERS ['alice']" in out,
    )


ADMIN = """
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
client = Client()
client.force_login(get_user_model().objects.get(username="alice"))
pages = ["/admin/", "/admin/agentstore/"]
for model in apps.get_app_config("agentstore").get_models():
    try:
        pages.append(reverse(f"admin:agentstore_{model._meta.model_name}_changelist"))
    except Exception:
        pass
from agentstore.models import Session, Task
VIEWS = {"tree": ["tree", "context", "transcript"], "loop": ["steps", "grants"]}
for session in Session.objects.all()[:5]:
    change = reverse("admin:agentstore_session_change", args=[session.pk])
    pages.append(change)
    pages += [change.replace("/change/", f"/{view}/") for view in VIEWS.get(session.kind, [])]
pages.append("/admin/agentstore/session/usage/?days=7")
pages.append("/admin/agentstore/session/?q=hello")
for task in Task.objects.all()[:5]:
    pages.append(reverse("admin:agentstore_task_change", args=[task.pk]))
from agentstore.models import WorkflowRun
for run in WorkflowRun.objects.all()[:2]:
    pages.append(reverse("admin:agentstore_workflowrun_change", args=[run.pk]))
bad = []
for page in pages:
    status = client.get(page, HTTP_HOST="localhost").status_code
    if status != 200:
        bad.append((page, status))
print("ADMIN", len(pages), "pages", "bad:", bad)
"""


def admin(p: Project) -> None:
    code, out = p.shell(ADMIN)
    found = re.search(r"ADMIN (\d+) pages bad: (.*)", out)
    p.record(
        "admin pages",
        "admin.md: the index, every changelist, session pages and their views, tasks, usage",
        tail(found.group(0) if found else out, 160),
        code == 0 and found is not None and found.group(2) == "[]",
    )


def table(steps: list[Step]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| step | what the doc says | what happened | ok? |", "| --- | --- | --- | --- |"]
    for s in steps:
        verdict = "ok" if s.ok else "**FAIL**"
        out.append(f"| `{cell(s.step)}` | {cell(s.doc)} | {cell(s.happened)} | {verdict} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the project directory")
    args = parser.parse_args()
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="agentstore-newuser-"))
    p = Project(tmp)
    try:
        token = install(p)
        checks(p)
        quickstart(p)
        made = served(p, token) if token else []
        if made:
            commands(p, made)
        admin(p)
    finally:
        if args.keep:
            print(f"project kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [s for s in p.steps if not s.ok]
    print(
        f"new-user pass: a fresh startproject, the README and docs followed as written; "
        f"{len(p.steps)} steps, {len(failed)} failed, {time.monotonic() - started:.0f} s\n"
    )
    print(table(p.steps))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

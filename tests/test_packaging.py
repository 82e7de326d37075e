"""The wheel ships the app — migrations, templates, ``py.typed`` — and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_wheel_contents(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes build/ and *.egg-info into the tree it
    # builds, and the SQLite and PostgreSQL runs of ./scripts/test run side by side.
    source = tmp_path / "source"
    shutil.copytree(
        REPO_ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "var", "build", "dist", "*.egg-info", "__pycache__", "node_modules"
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("agentstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/", 1)[0] for name in names}

    assert "agentstore/py.typed" in names
    assert "agentstore/migrations/0001_initial.py" in names
    assert "agentstore/models/sessions.py" in names
    assert "agentstore/db/driver.py" in names
    assert any(name.startswith("agentstore/templates/admin/agentstore/") for name in names)
    assert any(name.startswith("agentstore/static/agentstore/") for name in names)
    assert "agentstore/management/commands/agentstore.py" in names
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"agentstore"}
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Requires-Python: >=3.11" in text
    assert "Requires-Dist: Django<6.2,>=5.2" in text
    assert "Provides-Extra: postgres" in text

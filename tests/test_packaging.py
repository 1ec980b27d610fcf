"""The wheel: the root's ``__init__.py`` installs as ``poolq`` (the public face), the seven folders as ``poolq.*``,
every module of theirs is in it, nothing else is."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "storage", "jobs", "products", "worker", "devtools", "api")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md", "__init__.py"):
        shutil.copy(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True)
    [built] = out.glob("poolq-*.whl")
    return zipfile.ZipFile(built)


def test_every_module_of_the_four_folders_is_in_the_wheel_under_poolq(wheel):
    names = set(wheel.namelist())
    expected = {f"poolq/{path.relative_to(ROOT).as_posix()}" for folder in FOLDERS
                for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts}
    assert expected - names == set()


def test_nothing_else_lands_at_the_top_level(wheel):
    top = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert top == {"poolq", next(name for name in top if name.endswith(".dist-info"))}
    root_modules = {name for name in wheel.namelist() if name.count("/") == 1 and name.startswith("poolq/")}
    assert root_modules == {"poolq/__init__.py"}  # the face; not setup.py


def test_the_demo_corpus_and_the_console_script_ship(wheel):
    names = set(wheel.namelist())
    assert "poolq/devtools/demo/sample_corpus.jsonl" in names
    assert "poolq/engine/models/int8_calibration.txt" in names  # dtype int8 calibrates on it at load
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "poolq = poolq.api.cli.main:main" in wheel.read(entry_points).decode()


def test_the_dashboard_assets_ship(wheel):
    names = set(wheel.namelist())
    assets = {f"poolq/api/server/ui/{path.name}" for path in (ROOT / "api" / "server" / "ui").iterdir()}
    assert {"poolq/api/server/ui/index.html", "poolq/api/server/ui/dashboard.js"} <= assets
    assert assets - names == set()

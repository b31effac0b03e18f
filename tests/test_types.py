"""mypy --strict holds the core, the runtime and sla (pyproject.toml's [tool.mypy]), in the test command.

The folders map into one import namespace through pyproject's
``package-dir``, which mypy cannot follow through an editable install, so
the test lays the namespace out as symbolic links in a temporary folder
and checks the package ``certfsm`` there: the modules keep their real
names (``certfsm.runtime._controller``) and their real files.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def namespace_tree(root: Path) -> Path:
    """`root`/certfsm laid out as the installed namespace, each entry a link to the checkout's file or folder."""
    package_dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    core = root / "certfsm"
    core.mkdir()
    for entry in (REPO / package_dirs["certfsm"]).iterdir():
        (core / entry.name).symlink_to(entry)
    for name, folder in package_dirs.items():
        parts = name.split(".")
        if len(parts) == 2 and not (core / parts[1]).exists():
            (core / parts[1]).symlink_to(REPO / folder)
    (root / "pyproject.toml").symlink_to(REPO / "pyproject.toml")
    return root


def test_mypy_strict_finds_nothing(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed; pip install -e '.[test]' (the test extra has it)")
    root = namespace_tree(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "pyproject.toml",
            "--cache-dir",
            str(tmp_path / ".cache"),
            "-p",
            "certfsm",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr

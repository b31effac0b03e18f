"""The code passes ruff's lint rules chosen in pyproject.toml (pycodestyle and pyflakes), in the test command."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("certfsm", "verify", "fsm", "runtime", "sla", "hdl_export", "tests", "bench", "packaging")


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed; pip install -e '.[test]' (the test extra has it)")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *[f for f in FOLDERS if (REPO / f).exists()]],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr

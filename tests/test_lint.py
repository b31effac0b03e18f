"""The code passes ruff's lint rules chosen in pyproject.toml (pycodestyle and pyflakes) and is in ruff's format.

Both run in the test command, so an unused import, an undefined name or a
hand-formatted block fails the suite instead of waiting for a review;
`python3 -m ruff format` rewrites the tree into the expected form.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("certfsm", "verify", "fsm", "runtime", "sla", "hdl_export", "cli", "tests", "bench", "packaging")


def _ruff(*arguments: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed; pip install -e '.[test]' (the test extra has it)")
    folders = [f for f in FOLDERS if (REPO / f).exists()]
    return subprocess.run(
        [sys.executable, "-m", "ruff", *arguments, "--no-cache", *folders],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_finds_nothing():
    done = _ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_in_ruff_format():
    done = _ruff("format", "--check")
    assert done.returncode == 0, "run python3 -m ruff format\n" + done.stdout + done.stderr

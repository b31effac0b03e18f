"""Every benchmark script answers `--help` with its usage and exits 0, without running anything.

The bench scripts are run by hand and by CI's benchmark step, rarely by the test suite; a script that reads
`sys.argv` by position fails on `--help` with a traceback (or starts a long run), which a reader meets first.
Each runs in its own process, as a user starts it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))

pytestmark = pytest.mark.slow  # about a third of a second per script, a few seconds in all


def test_the_bench_scripts_are_found():
    assert len(SCRIPTS) >= 5, f"no bench scripts under {BENCH}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_a_bench_script_answers_help(script):
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60, cwd=BENCH.parent
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {script.name}"), done.stdout
    summary = " ".join(ast.get_docstring(ast.parse(script.read_text())).splitlines()[0].split())
    assert summary in " ".join(done.stdout.split()), f"--help does not state the script's summary: {summary!r}"

"""Run the `certfsm` command line as a real process, and recognise its one-line errors.

Tests that need the interpreter's own exit status, tracebacks, signals or
worker pools use `run_cli`; the rest run `main` in the test process
(`cli_in_process.run_main`), which is much cheaper.
"""

from __future__ import annotations

import re
import subprocess
import sys


def run_cli(*args, cwd=None, timeout: float = 1800) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m certfsm.cli ARGS`` in a fresh interpreter, in `cwd` when given."""
    done = subprocess.run(
        [sys.executable, "-m", "certfsm.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr


def one_line_error(code: int, stderr: str, pattern: str):
    """Exit 2, no traceback, and exactly one non-blank stderr line matching `pattern` (from its start)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return code == 2 and "Traceback" not in stderr and len(lines) == 1 and re.match(pattern, lines[0])

"""A long-running `certfsm` command for tests that signal it: started, stopped with SIGTERM, never left behind."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys


@contextlib.contextmanager
def running_cli(*args):
    """`python -m certfsm.cli ARGS` for the block; killed if it is still alive when the block leaves."""
    process = subprocess.Popen(
        [sys.executable, "-m", "certfsm.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def stop(process) -> tuple[str, str]:
    """SIGTERM, then what the process printed (stdout, stderr) once it has ended."""
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=60)

"""Run the `certfsm` command line in the test process, through `certfsm.cli.main`, the console entry point.

Why: a fresh interpreter per call costs half a second to a second of
start-up and imports, which the fast suite paid dozens of times for
commands that end in a one-line error. The tests that need a real process
(exit status from the interpreter, `--debug` tracebacks, signals, worker
pools) keep starting one; this is for the rest. Output is captured from
sys.stdout and sys.stderr as they are when `main` writes (click and typer
look them up at each write).
"""

from __future__ import annotations

import contextlib
import io
import os


def run_main(*args, cwd=None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``certfsm ARGS`` run by `main` in this process, in `cwd` when given."""
    from certfsm.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(os.fspath(cwd)))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        code = main([str(arg) for arg in args])
    return code, out.getvalue(), err.getvalue()

"""Keeping a native solver's output, crashes and hangs away from the caller.

`run_in_child(function, patience)` calls `function()` in a forked child
process and returns its value, or says why there is none: the child was
killed when `patience` seconds passed without an answer, it exited with a
status other than 0 or by a signal, or its answer could not be read.
`run_silenced(function)` is the in-process counterpart: no isolation,
only file descriptors 1 and 2 silenced for the duration.

The child is made with plain ``os.fork``, so it also works inside
daemonic pool workers (which may not start ``multiprocessing``
children); the function therefore needs no pickling, only its value does.
The child restores the default SIGINT handler, disables faulthandler,
asks Linux to SIGKILL it if the parent dies (``PR_SET_PDEATHSIG``, and
leaves at once if the parent died before it asked),
silences file descriptors 1 and 2 (native solvers print from C/C++),
sends its pickled value back through a pipe and leaves with
``os._exit``, never returning into the caller's code.

Invariants: `run_in_child` starts no threads, leaves no child behind (it
reaps the child on every path, killing it first if the parent is
interrupted) and never raises for a failure of the child.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import pickle
import select
import signal
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

T = TypeVar("T")

_CHILD_FAILED = 70
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildOutcome:
    """What a child gave back: `value` when `failure` is empty, else why there is none.

    `timed_out` is true when the child was killed because `patience` ran out
    (`failure` then says so too); otherwise a failure names the child's exit
    (``exit status 3``, ``killed by signal SIGSEGV``) or an unreadable answer.
    """

    value: object = None
    failure: str = ""
    timed_out: bool = False


def run_in_child(function: Callable[[], object], patience: float) -> ChildOutcome:
    """`function()` in a forked child killed after `patience` seconds. Never raises for child failures."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(function, write_fd, parent)
    os.close(write_fd)
    try:
        payload, killed = _read_until(read_fd, time.monotonic() + patience, pid)
    except BaseException:
        _kill(pid)
        _reap(pid)
        raise
    finally:
        os.close(read_fd)
    status = _reap(pid)
    if killed:
        return ChildOutcome(failure=f"no answer within {patience:.1f} s, killed", timed_out=True)
    if status is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return ChildOutcome(failure=_describe(status))
    try:
        value = pickle.loads(payload)
    except Exception as error:
        return ChildOutcome(failure=f"unreadable answer ({type(error).__name__})")
    return ChildOutcome(value=value)


def run_silenced(function: Callable[[], T]) -> T:
    """`function()` in this process with file descriptors 1 and 2 silenced for the duration."""
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        return function()
    finally:
        _call_libc("fflush", None)  # C stdio buffers: the solver's output lands in /dev/null, not later
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _call_libc(name: str, *args) -> None:
    """Call the C library function `name`, best effort (nothing happens where it is missing)."""
    try:
        getattr(ctypes.CDLL(None), name)(*args)
    except (OSError, AttributeError):
        pass


def _child(function: Callable[[], object], write_fd: int, parent: int) -> None:
    """Body of the forked child: never returns into the caller's code.

    A parent that dies between the fork and the ``prctl`` call sends no
    death signal, so the child checks afterwards that its parent is still
    `parent` and leaves at once if not (it has been re-parented).
    """
    status = _CHILD_FAILED
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        faulthandler.disable()
        _call_libc("prctl", _PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        data = pickle.dumps(function())
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
        status = 0
    finally:
        os._exit(status)


def _read_until(fd: int, end: float, pid: int) -> tuple[bytes, bool]:
    """Read the child's answer until EOF; kill the child and say so if `end` passes first."""
    chunks = []
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            _kill(pid)
            return b"", True
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks), False
            chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> int | None:
    """Wait for the child; EOF on the pipe means it is exiting (only it holds the write end)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return status


def _describe(status: int | None) -> str:
    if status is None:
        return "exit status lost (the child was reaped elsewhere)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"killed by signal {name}"
    return f"exit status {os.WEXITSTATUS(status)}"

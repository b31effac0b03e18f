"""Test data that several parallel workers read, made once per test run."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Callable


def made_once_per_run(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` that `make(folder)` fills once per test run, shared by every parallel worker.

    Why: a session fixture runs once per xdist worker; an artifact that
    takes seconds to distil and that tests only read is made by the first
    worker that asks (the others wait on a lock) and read by all. A `make`
    that fails leaves no mark, so the next worker tries again and fails
    the same way. Tests must copy what they change.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            done.touch()
    return folder

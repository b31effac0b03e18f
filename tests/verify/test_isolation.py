"""The solver child's own guards, apart from any solver."""

from __future__ import annotations

import os

from certfsm.verify import _isolation


def test_a_child_whose_parent_died_before_it_asked_for_the_death_signal_leaves_at_once(tmp_path):
    """The parent can die between the fork and ``prctl``; the child must not run the solver then."""
    marker = tmp_path / "ran"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        not_my_parent = os.getppid() + 1_000_000  # never a live pid: pid_max is at most 4 194 304
        _isolation._child(lambda: marker.write_text("solver ran"), write_fd, not_my_parent)
    os.close(write_fd)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert not marker.exists(), "the child ran its function although its parent was gone"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == _isolation._CHILD_FAILED


def test_a_child_with_its_parent_alive_runs_its_function():
    """The same guard lets the ordinary case through (the value comes back)."""
    assert _isolation.run_in_child(lambda: 41 + 1, patience=30).value == 42

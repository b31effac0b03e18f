"""The progress lines of `certfsm distill` and `inspect --deep` off a terminal (a pipe, a CI log)."""

import re
import time

import pytest

from certfsm.cli import _CellProgress


@pytest.mark.slow
def test_off_a_terminal_the_last_line_is_repeated_while_a_hard_cell_runs(monkeypatch, capsys):
    """No new message for a while (one hard cell can take minutes): the line comes again, time advanced."""
    monkeypatch.setattr(_CellProgress, "PLAIN_SECONDS", 0.05)
    with _CellProgress(False, plain=True) as bar:
        bar.update(5, 9, "engines: 4 hard cells left, 50.0% exact so far, about 2 min left")
        time.sleep(0.5)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3, lines
    assert all(
        re.match(r"^distilling \[0m00s\] 5/9 cells; engines: 4 hard cells left, 50\.0% exact so far", line)
        for line in lines
    ), lines
    with _CellProgress(False, plain=False) as bar:
        bar.update(5, 9, "engines: 4 hard cells left")
        time.sleep(0.2)
    assert capsys.readouterr().err == ""

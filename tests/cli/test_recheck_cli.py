"""certfsm recheck as an auditor meets it: one line per file, a summary line of counts, and an exit code that
tells all confirmed (0) from a contradiction (1) from files a solver could not confirm (3)."""

import re
import shutil

import pytest
from cli_in_process import run_main
from recheck_files import EASY_UNSAT, pigeonhole, write_files


@pytest.mark.skipif(shutil.which("z3") is None, reason="no z3 command on PATH; pip install z3-solver")
@pytest.mark.slow
def test_recheck_exit_codes_tell_confirmed_from_unconfirmed_from_mismatched(tmp_path):
    """0 all confirmed, 3 some unconfirmed and none contradicted, 1 any MISMATCH; each row and summary line pinned."""
    confirmed = write_files(tmp_path / "confirmed", easy=EASY_UNSAT)
    code, out, err = run_main("recheck", confirmed, "--timeout", "30")
    assert (code, err) == (0, ""), out + err
    assert re.fullmatch(
        r"easy\.smt2 +recorded unsat +z3 unsat +[\d.]+ s  confirmed  \(solver confirms unsat\)", out.splitlines()[0]
    )
    assert out.splitlines()[-1] == "1 of 1 files confirmed by z3, 0 unconfirmed, 0 mismatched, 0 invalid"

    unconfirmed = write_files(tmp_path / "unconfirmed", easy=EASY_UNSAT, hard=pigeonhole())
    code, out, err = run_main("recheck", unconfirmed, "--timeout", "1")
    assert (code, err) == (3, ""), out + err
    assert re.fullmatch(
        r"hard\.smt2 +recorded unsat +z3 timeout +[\d.]+ s  unconfirmed \(timeout after 1 s\)  \(nothing "
        r"contradicts the recorded unsat, but the solver did not finish; give it more time\)",
        out.splitlines()[1],
    )
    assert out.splitlines()[-1] == "1 of 2 files confirmed by z3, 1 unconfirmed, 0 mismatched, 0 invalid"
    assert "MISMATCH" not in out

    flipped = EASY_UNSAT.replace("(set-info :status unsat)", "(set-info :status sat)")
    mismatched = write_files(tmp_path / "mismatched", easy=flipped, hard=pigeonhole())
    code, out, err = run_main("recheck", mismatched, "--timeout", "1")
    assert (code, err) == (1, ""), out + err
    assert re.fullmatch(
        r"easy\.smt2 +recorded sat +z3 unsat +[\d.]+ s  MISMATCH  \(solver answered unsat but the file records sat\)",
        out.splitlines()[0],
    )
    assert out.splitlines()[-1] == "0 of 2 files confirmed by z3, 1 unconfirmed, 1 mismatched, 0 invalid"

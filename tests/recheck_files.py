"""Hand-written SMT-LIB files with a known fate under a stock solver, for the tests of `certfsm recheck`.

`pigeonhole` is the hard one: n + 1 pigeons in n holes is unsatisfiable,
and every resolution proof of it (so every CDCL run, z3's included) is
exponential in n; at n = 12 no solver finishes in a few seconds on any
machine, so a re-check with a 1 s limit times out for real.
"""

from __future__ import annotations

from pathlib import Path

EASY_UNSAT = """(set-info :smt-lib-version 2.6)
(set-info :status unsat)
(set-logic QF_LRA)
(declare-const x Real)
(assert (> x 1.0))
(assert (< x 0.0))
(check-sat)
(exit)
"""

UNDECIDED = """(set-info :smt-lib-version 2.6)
(set-info :status sat)
(declare-const x Real)
(declare-const y Real)
(assert (= (* x x x y) (+ (* y y) 2.0)))
(assert (> (^ 2.0 x) 3.0))
(check-sat)
(exit)
"""
"""A real power with a real exponent: z3 answers unknown at once."""


def pigeonhole(holes: int = 12) -> str:
    """SMT-LIB 2.6 with status unsat: holes + 1 pigeons, each in some hole, no two in one hole."""
    pigeons = range(holes + 1)
    lines = ["(set-info :smt-lib-version 2.6)", "(set-info :status unsat)", "(set-logic QF_UF)"]
    lines += [f"(declare-const p{i}_{j} Bool)" for i in pigeons for j in range(holes)]
    lines += ["(assert (or " + " ".join(f"p{i}_{j}" for j in range(holes)) + "))" for i in pigeons]
    lines += [
        f"(assert (not (and p{a}_{j} p{b}_{j})))" for j in range(holes) for a in pigeons for b in pigeons if a < b
    ]
    return "\n".join([*lines, "(check-sat)", "(exit)", ""])


def write_files(folder: Path, **files: str) -> Path:
    """`folder` holding one NAME.smt2 per keyword argument (no summary.json: only the recorded status counts)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / f"{name}.smt2").write_text(text)
    return folder

"""parse_vnnlib under fuzzing: every mutated file gives properties or one VnnlibError line, within seconds.

The seeds cover what the parser reads: declarations, input bounds in both
directions, chains, strict comparisons, and/or, several input boxes and
linear terms with exact decimals. The tokens are the ones whose damage
once crashed or hung it (long numbers, exponents, products, nesting).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from certfsm import VnnlibError
from parse_contract import FAST, SLOW, check_bytes, mutated, parser_fixture

ACAS_STYLE = b"""; ACAS Xu property 1 style
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const X_2 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)

(assert (<= X_0 0.679857769))
(assert (>= X_0 0.6))
(assert (<= X_1 0.5))
(assert (>= X_1 -0.5))
(assert (<= -0.5 X_2 0.5))

(assert (>= Y_0 3.991125645861615))
"""

BOXES_AND_TERMS = b"""(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(declare-const Y_2 Real)
(assert (<= X_1 1.0))
(assert (>= X_1 -1.0e0))
(assert (or
    (and (>= X_0 -0.5) (<= X_0 -0.1) (<= Y_0 Y_1))
    (and (<= 0.1 X_0) (>= 0.5 X_0) (<= Y_0 Y_1) (< (* 0.1 Y_2) 3))
    (and (<= (- X_0) 0.5) (>= (- X_0) 0.1) (>= (+ Y_2 (* 2 Y_1)) (- 3)))
))
(assert (< (- Y_0 Y_2 1.5E-3) 0.25))
"""

TOKENS = [
    b"(",
    b")",
    b" ",
    b"\n",
    b";",
    b"0",
    b"9",
    b".",
    b"e",
    b"E-",
    b"e999999999",
    b"-",
    b"+",
    b"1e300 ",
    b"1e-300 ",
    b"(* 1e300 ",
    b"(and ",
    b"(or ",
    b"(<= Y_0 1) ",
    b"X_0 ",
    b"Y_1 ",
    b"X_999999999 ",
    b"\xff",
]
NESTINGS = [(b"(and ", b")"), (b"(or ", b")"), (b"(+ ", b")"), (b"(", b")"), (b"(- ", b")")]
FILES = mutated([ACAS_STYLE, BOXES_AND_TERMS], TOKENS, NESTINGS)


parse = parser_fixture("certfsm.verify._vnnlib.parse_vnnlib")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return tmp_path_factory.mktemp("vnnlib-fuzz") / "case.vnnlib"


def _check(parse, case, data: bytes) -> None:
    check_bytes(parse, case, data, VnnlibError, "list")


@pytest.mark.slow
def test_the_seeds_parse(parse, case):
    for seed in (ACAS_STYLE, BOXES_AND_TERMS):
        _check(parse, case, seed)


@FAST
@given(data=FILES)
def test_mutated_files_give_properties_or_one_line(parse, case, data):
    _check(parse, case, data)


@pytest.mark.slow
@SLOW
@given(data=FILES)
def test_many_mutated_files_give_properties_or_one_line(parse, case, data):
    _check(parse, case, data)

"""parse_vnnlib and format_vnncomp_result.

The ACAS Xu files are checked against numbers read from the file text with
a plain regular expression (an oracle independent of the s-expression
parser), and the unsafe sets by their meaning: `unsafe_slack` on output
vectors chosen by hand to lie inside or outside them.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from certfsm import VnnlibError
from certfsm.verify._vnnlib import format_vnncomp_result, parse_vnnlib

_BOUND = re.compile(r"^\(assert \((<=|>=) X_(\d) (\S+)\)\)$", re.MULTILINE)


def _write(tmp_path: Path, text: str, name: str = "case.vnnlib") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def _y(*values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


# --- ACAS Xu -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["prop_1", "prop_2", "prop_3", "prop_4", "prop_7", "prop_10"])
def test_acasxu_box_matches_the_file(name, acasxu):
    path = acasxu / "vnnlib" / f"{name}.vnnlib"
    (prop,) = parse_vnnlib(path, n_inputs=5, n_outputs=5)
    lower, upper = [None] * 5, [None] * 5
    for relation, index, value in _BOUND.findall(path.read_text()):
        (upper if relation == "<=" else lower)[int(index)] = Fraction(value)
    assert prop.exact_lower == tuple(lower) and prop.exact_upper == tuple(upper)
    # The float box is the exact box rounded outward, by at most one step.
    for low, high, exact_low, exact_high in zip(prop.lower, prop.upper, lower, upper):
        assert Fraction(low) <= exact_low and exact_high <= Fraction(high)
        assert np.nextafter(low, np.inf) > exact_low and np.nextafter(high, -np.inf) < exact_high
    assert prop.name == name
    assert str(path) in prop.description
    assert prop.metadata == {"vnnlib": str(path)}
    assert all(c.A.shape[1] == 5 for c in prop.unsafe)


def test_acasxu_prop_1_is_one_constraint_on_y0(acasxu):
    (prop,) = parse_vnnlib(acasxu / "vnnlib" / "prop_1.vnnlib")
    (conjunction,) = prop.unsafe
    assert conjunction.A.tolist() == [[-1.0, 0.0, 0.0, 0.0, 0.0]]
    assert conjunction.b.tolist() == [-3.991125645861615]
    assert conjunction.labels == ("(>= Y_0 3.991125645861615) (line 36)",)
    assert prop.unsafe_slack(_y(3.991125645861615, 9, 9, 9, 9)) == 0.0
    assert prop.unsafe_slack(_y(3.99112564586161, 9, 9, 9, 9)) < 0


@pytest.mark.parametrize(
    "name, n_disjuncts, rows",
    [("prop_2", 1, 4), ("prop_3", 1, 4), ("prop_4", 1, 4), ("prop_7", 2, 3), ("prop_10", 4, 1)],
)
def test_acasxu_disjunct_shapes(name, n_disjuncts, rows, acasxu):
    (prop,) = parse_vnnlib(acasxu / "vnnlib" / f"{name}.vnnlib", n_inputs=5, n_outputs=5)
    assert len(prop.unsafe) == n_disjuncts
    assert all(c.A.shape == (rows, 5) for c in prop.unsafe)


def test_acasxu_prop_7_means_strong_left_or_strong_right_is_minimal(acasxu):
    (prop,) = parse_vnnlib(acasxu / "vnnlib" / "prop_7.vnnlib")
    assert prop.unsafe_slack(_y(1, 1, 1, 0, 2)) >= 0  # strong left minimal
    assert prop.unsafe_slack(_y(1, 1, 1, 2, 0)) >= 0  # strong right minimal
    assert prop.unsafe_slack(_y(1, 1, 1, 1, 1)) >= 0  # ties count (non-strict)
    assert prop.unsafe_slack(_y(0, 1, 1, 2, 2)) < 0  # clear of conflict minimal
    assert prop.unsafe_slack(_y(2, 2, 0.5, 1, 1)) < 0  # weak right beats both strong advisories


def test_acasxu_prop_2_and_3_are_opposite_directions(acasxu):
    (prop_2,) = parse_vnnlib(acasxu / "vnnlib" / "prop_2.vnnlib")
    (prop_3,) = parse_vnnlib(acasxu / "vnnlib" / "prop_3.vnnlib")
    coc_maximal, coc_minimal = _y(5, 1, 2, 3, 4), _y(0, 1, 2, 3, 4)
    assert prop_2.unsafe_slack(coc_maximal) >= 0 > prop_2.unsafe_slack(coc_minimal)
    assert prop_3.unsafe_slack(coc_minimal) >= 0 > prop_3.unsafe_slack(coc_maximal)


# --- the fragment -------------------------------------------------------------


INPUT_BOXES = """
    ; two input boxes, VNN-LIB property 6 style
    (declare-const X_0 Real)
    (declare-const X_1 Real)
    (declare-const Y_0 Real)
    (declare-const Y_1 Real)
    (declare-const Y_2 Real)
    (assert (<= X_1 1.0))
    (assert (>= X_1 -1.0))
    (assert (or
        (and (>= X_0 -0.5) (<= X_0 -0.1) (<= Y_0 Y_1))
        (and (<= 0.1 X_0) (>= 0.5 X_0) (<= Y_0 Y_1))
        (and (<= (- X_0) 0.5) (>= (- X_0) 0.1) (>= (+ Y_2 (* 2 Y_1)) (- 3)))
    ))
    (assert (< (- Y_0 Y_2) 0.25)) ; strict, beside the or
"""


def test_input_box_disjunction_gives_one_property_per_box(tmp_path):
    path = _write(tmp_path, INPUT_BOXES, "boxes.vnnlib")
    first, second = parse_vnnlib(path, n_inputs=2, n_outputs=3)

    assert (first.name, second.name) == ("boxes#0", "boxes#1")
    assert first.metadata == {"vnnlib": str(path), "box": 0} and second.metadata == {"vnnlib": str(path), "box": 1}
    assert str(path) in first.description and "input box 0 of 2" in first.description
    assert first.exact_lower == (Fraction(-1, 2), -1) and first.exact_upper == (Fraction(-1, 10), 1)
    assert second.exact_lower == (Fraction(1, 10), -1) and second.exact_upper == (Fraction(1, 2), 1)
    # -0.1 and 0.1 are not float64 values: the float box is rounded outward.
    assert first.upper.tolist() == [np.nextafter(-0.1, np.inf), 1.0]
    assert second.lower.tolist() == [np.nextafter(0.1, -np.inf), -1.0]

    # The first box collects the first and third disjunct, each with the distributed plain assert.
    assert [c.A.tolist() for c in first.unsafe] == [[[1, -1, 0], [1, 0, -1]], [[0, -2, -1], [1, 0, -1]]]
    assert [c.b.tolist() for c in first.unsafe] == [[0, 0.25], [3, 0.25]]
    assert [c.strict for c in first.unsafe] == [(False, True), (False, True)]
    assert [c.A.tolist() for c in second.unsafe] == [[[1, -1, 0], [1, 0, -1]]]
    assert first.unsafe[1].labels == ("(>= (+ Y_2 (* 2 Y_1)) (- 3)) (line 12)", "(< (- Y_0 Y_2) 0.25) (line 14)")
    # closure of the strict comparison: the boundary point is unsafe
    assert second.unsafe_slack(_y(0.0, 0.0, -0.25)) == 0.0


def test_linear_terms_are_combined_exactly(tmp_path):
    text = """
        (declare-const X_0 Real)
        (declare-const Y_0 Real)
        (declare-const Y_1 Real)
        (assert (<= -1 X_0 1))
        (assert (<= (+ Y_0 0.1 (* 0.5 Y_1 4)) (- 0.3 Y_1 Y_1)))
        (assert (> Y_1 (- 2)))
    """
    (prop,) = parse_vnnlib(_write(tmp_path, text))
    (conjunction,) = prop.unsafe
    # y0 + 0.1 + 2 y1 <= 0.3 - 2 y1  <=>  y0 + 4 y1 <= 0.2 (exactly 0.2, not 0.3 - 0.1 in floats)
    # y1 > -2 (strict, read as >=)   <=>  -y1 <= 2
    assert conjunction.A.tolist() == [[1.0, 4.0], [0.0, -1.0]]
    assert conjunction.b.tolist() == [0.2, 2.0]
    assert prop.lower.tolist() == [-1.0] and prop.upper.tolist() == [1.0]


def _lines(*body: str) -> str:
    header = [
        "(declare-const X_0 Real)",
        "(declare-const X_1 Real)",
        "(declare-const Y_0 Real)",
        "(declare-const Y_1 Real)",
    ]
    bounds = ["(assert (>= X_0 0))", "(assert (<= X_0 1))", "(assert (>= X_1 0))", "(assert (<= X_1 1))"]
    return "\n".join(header + bounds + list(body)) + "\n"


# line 9 is the first line after the 4 declarations and 4 bounds
BAD_FILES = [
    (
        "unclosed",
        _lines("(assert (<= Y_0 Y_1)", "(assert (<= Y_1 1))"),
        {},
        r"9: unbalanced parentheses: this '\(' is never closed; add the missing '\)'$",
    ),
    ("extra close", _lines("(assert (<= Y_0 Y_1)))"), {}, r"9: unbalanced parentheses: '\)' closes nothing; "),
    (
        "unknown variable",
        _lines("", "(assert (<= Z_0 1))"),
        {},
        r"10: unknown variable Z_0; declare it with \(declare-const Z_0 Real\) before use$",
    ),
    ("undeclared index", _lines("(assert (<= Y_2 1))"), {}, r"9: unknown variable Y_2; "),
    (
        "bad declaration",
        _lines("(declare-const speed Real)"),
        {},
        r"9: unknown variable name speed; VNN-LIB names inputs X_i and outputs Y_j$",
    ),
    (
        "missing bound",
        "\n".join(_lines().splitlines()[:7]) + "\n(assert (<= Y_0 1))\n",
        {},
        r"2: input X_1 has no upper bound; add \(assert \(<= X_1 <number>\)\)$",
    ),
    ("mixing", _lines("(assert (<= X_0 Y_0))"), {}, r"9: \(<= X_0 Y_0\) mixes inputs X and outputs Y; "),
    (
        "several inputs",
        _lines("(assert (<= (+ X_0 X_1) 1))"),
        {},
        r"9: \(<= \(\+ X_0 X_1\) 1\) constrains several inputs; ",
    ),
    ("non-linear", _lines("(assert (<= (* Y_0 Y_1) 1))"), {}, r"9: \(\* Y_0 Y_1\) is a non-linear term; "),
    ("unsupported term", _lines("(assert (<= (/ Y_0 2) 1))"), {}, r"9: unsupported term \(/ Y_0 2\); "),
    (
        "unsupported command",
        _lines("(check-sat)"),
        {},
        r"9: unsupported command \(check-sat \.\.\.\); certfsm reads declare-const and assert$",
    ),
    (
        "equality",
        _lines("(assert (= Y_0 Y_1))"),
        {},
        r"9: equality \(= \.\.\.\) is not supported; write it as \(<= a b\) and \(>= a b\)$",
    ),
    ("not", _lines("(assert (not (<= Y_0 Y_1)))"), {}, r"9: unsupported formula \(not \.\.\.\); "),
    (
        "input beyond network",
        _lines("(declare-const X_2 Real)"),
        {"n_inputs": 2},
        r"9: X_2 is beyond the network's 2 inputs \(X_0\.\.X_1\); check the property matches the network$",
    ),
    (
        "output beyond network",
        _lines("(declare-const Y_2 Real)"),
        {"n_outputs": 2},
        r"9: Y_2 is beyond the network's 2 outputs \(Y_0\.\.Y_1\); ",
    ),
    (
        "fewer outputs than network",
        _lines("(assert (<= Y_0 Y_1))"),
        {"n_outputs": 3},
        r"4: declares 2 outputs \(Y_0\.\.Y_1\) but the network has 3; ",
    ),
    ("gap", _lines("(declare-const Y_3 Real)"), {}, r"9: declares Y_3 but not Y_2; declare Y_0\.\.Y_3$"),
    ("twice", _lines("(declare-const Y_1 Real)"), {}, r"9: Y_1 is declared twice \(first on line 4\); remove one$"),
    (
        "empty box",
        _lines("(assert (>= X_0 2))"),
        {},
        r"9: the unsafe set is empty \(X_0 >= 2\.0 \(line 9\) and X_0 <= 1\.0 \(line 6\)\), so the property would hold vacuously; ",
    ),
    ("not a number", _lines("(assert (<= Y_0 1e999))"), {}, r"9: 1e999 is beyond the float64 range; "),
    # limits checked before the work they bound (fuzzing found each of these crashing or hanging)
    (
        "deep nesting",
        _lines("(assert " + "(and " * 150 + "(<= Y_0 1)" + ")" * 151),
        {},
        r"9: nesting deeper than 100 levels; VNN-LIB properties nest a few levels, flatten the formula or split ",
    ),
    (
        "long number",
        _lines(f"(assert (<= Y_0 {'1' * 5000}))"),
        {},
        r"9: 1{37}\.\.\. has 5000 digits; certfsm reads numbers of at most 1100 digits ",
    ),
    (
        "huge exponent",
        _lines("(assert (<= Y_0 1e-999999999))"),
        {},
        r"9: 1e-999999999 has the exponent -999999999, outside -1100\.\.1100 \(float64 spans ",
    ),
    (
        "long exponent",
        _lines(f"(assert (<= Y_0 1e{'9' * 3000}))"),
        {},
        r"9: 1e9{35}\.\.\. has the exponent 9{17}\.\.\., outside ",
    ),
    (
        "leading zeros of an exponent",
        _lines(f"(assert (<= Y_0 1e{'0' * 3000}1200))"),
        {},
        r"9: 1e0{35}\.\.\. has the exponent 0{17}\.\.\., outside ",
    ),
    (
        "product overflow",
        _lines("(assert (>= (* 1e300 1e300 Y_0) 1))"),
        {},
        r"9: \(\* 1e300 1e300 Y_0\) has a coefficient or constant beyond the float64 range \(above 1\.8e308 ",
    ),
    (
        "difference overflow",
        _lines("(assert (<= (- Y_0 1e308) 1e308))"),
        {},
        r"9: \(<= \(- Y_0 1e308\) 1e308\) has a coefficient or constant beyond the float64 range ",
    ),
    (
        "input bound overflow",
        _lines("(assert (<= (* 1e-300 X_0) 1e10))"),
        {},
        r"9: \(<= \(\* 1e-300 X_0\) 1e10\) bounds X_0 by a number beyond the float64 range \(above 1\.8e308 "
        r"in magnitude\); use a finite bound$",
    ),
    (
        "scaled right-hand side overflow",
        _lines("(assert (<= (* 1e-400 Y_0) 1e300))"),
        {},
        r"9: \(<= \(\* 1e-400 Y_0\) 1e300\), scaled to make its coefficients float64 integers, has a right-hand ",
    ),
    (
        "too many bits",
        _lines("(assert (<= (* " + "1e-1000 " * 10 + "Y_0) 1))"),
        {},
        r"9: \(\* (1e-1000 )+1e\.\.\. has a coefficient or constant that needs more than 32768 bits to hold exactly; ",
    ),
    (
        "exponential formula",
        _lines("(assert (and " + "(or (<= Y_0 1) (<= Y_1 1)) " * 20 + "))"),
        {},
        r"9: the formula expands to more than 100000 disjuncts or 200000 constraints in disjunctive normal form; ",
    ),
    (
        "long name",
        _lines(f"(declare-const X_{'9' * 5000} Real)"),
        {},
        r"9: unknown variable name X_9{75}\.\.\.; VNN-LIB names inputs X_i and outputs Y_j$",
    ),
]


@pytest.mark.parametrize("text, kwargs, message", [case[1:] for case in BAD_FILES], ids=[case[0] for case in BAD_FILES])
def test_bad_files_name_the_file_and_line(tmp_path, text, kwargs, message):
    path = tmp_path / "bad.vnnlib"
    path.write_text(text)
    with pytest.raises(VnnlibError, match=rf"^{re.escape(str(path))}:{message}"):
        parse_vnnlib(path, **kwargs)


def test_numbers_at_the_limits_are_still_read_exactly(tmp_path):
    from decimal import Decimal

    tiny = format(Decimal(5e-324), "f")  # the exact decimal of the smallest subnormal: 1075 digits
    largest = format(Decimal(np.finfo(np.float64).max), "f")
    text = _lines(
        f"(assert (<= Y_0 {tiny}))", f"(assert (<= Y_1 (* {largest} 1e-1100)))", f"(assert (>= Y_1 (- {largest})))"
    )
    (prop,) = parse_vnnlib(_write(tmp_path, text))
    assert prop.unsafe[0].exact_b == (
        Fraction(5e-324),
        Fraction(np.finfo(np.float64).max) / 10**1100,
        Fraction(np.finfo(np.float64).max),
    )


def test_missing_file(tmp_path):
    path = tmp_path / "absent.vnnlib"
    with pytest.raises(VnnlibError, match=rf"^{re.escape(str(path))}: no such file; "):
        parse_vnnlib(path)


def test_an_empty_disjunct_is_dropped_when_another_survives(tmp_path):
    text = _lines("(assert (or (and (>= X_0 2) (<= Y_0 0)) (and (<= X_0 0.5) (<= Y_1 0))))")
    (prop,) = parse_vnnlib(_write(tmp_path, text))
    assert prop.upper.tolist() == [0.5, 1.0]
    assert [c.A.tolist() for c in prop.unsafe] == [[[0.0, 1.0]]]


# --- the VNN-COMP result text ---------------------------------------------------


@pytest.mark.parametrize(
    "verdict, text", [("proved", "unsat"), ("unsat", "unsat"), ("unknown", "unknown"), ("timeout", "timeout")]
)
def test_result_words(verdict, text):
    assert format_vnncomp_result(verdict) == text


def test_sat_result_lists_inputs_then_outputs():
    text = format_vnncomp_result("violated", [0.5, -0.5], [1.0, 0.375, -3.0])
    assert text == "sat\n((X_0 0.5)\n (X_1 -0.5)\n (Y_0 1.0)\n (Y_1 0.375)\n (Y_2 -3.0))"


def test_witness_values_are_the_exact_decimals_of_the_checked_floats():
    """The printed point is the checked point: 0.1 prints as the float64 0.1 is, not as the decimal 1/10."""
    text = format_vnncomp_result("violated", [0.1], [2.5e-7])
    assert "(X_0 0.1000000000000000055511151231257827021181583404541015625)" in text
    assert "(Y_0 0.00000024999999999999998868702795647156467140348468092270195484161376953125)" in text


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6))
def test_sat_values_read_back_exactly(values):
    text = format_vnncomp_result("sat", values, values[:1])
    read = [Fraction(v) for v in re.findall(r"\(X_\d+ (\S+)\)", text)]
    assert read == [Fraction(float(v)) for v in values]


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6))
def test_sat_values_read_back_bit_for_bit(values):
    text = format_vnncomp_result("sat", values, values[:1])
    read = [float(v) for v in re.findall(r"\(X_\d+ (\S+)\)", text)]
    assert read == [float(np.float64(v)) for v in values]


@pytest.mark.parametrize(
    "args, message",
    [
        (("holds",), r"^verdict='holds' is not one of "),
        (("sat",), r"^verdict='sat' needs both the counterexample and the outputs$"),
        (("unsat", [0.0], [0.0]), r"^verdict='unsat' carries no counterexample; "),
        (("sat", [np.nan], [0.0]), r"^the counterexample and outputs must be finite"),
    ],
)
def test_result_misuse(args, message):
    with pytest.raises(ValueError, match=message):
        format_vnncomp_result(*args)

"""The exact semantics of docs/semantics.md, end to end through the property IR.

Decimal constants are the rationals written, strict atoms are strict, and
a verdict is about that formula: the float arrays engines compute with
are rounded in the sound direction, a witness counts only when it holds
exactly, and the SMT-LIB text states the exact formula.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from certfsm import AffineLayer, Network
from certfsm.verify import check
from certfsm import float_at_least, float_at_most
from certfsm.verify._exact import rational_term
from certfsm.verify._property import Conjunction, Property
from certfsm.verify._smtlib import smtlib_script
from certfsm.verify._validate import validate_counterexample

TENTH = Fraction(1, 10)


def _identity() -> Network:
    return Network((AffineLayer(np.array([[1.0]]), np.array([0.0]), "y = x"),))


def _at_least(bound: Fraction, strict: bool = False) -> Conjunction:
    """y0 >= bound (y0 > bound when strict), as the row -y0 <= -bound."""
    return Conjunction([[-1.0]], [float(-bound)], (f"y0 >= {bound}",), (-bound,), (strict,))


@pytest.mark.parametrize("value", [TENTH, Fraction(-1, 3), Fraction(30000000000000001, 10**17), Fraction(5, 4)])
def test_sound_rounding_brackets_the_exact_value_by_neighbouring_floats(value):
    low, high = float_at_most(value), float_at_least(value)
    assert Fraction(low) <= value <= Fraction(high)
    assert high == low or np.nextafter(low, np.inf) == high


@pytest.mark.parametrize(
    "value, text",
    [
        (TENTH, "0.1"),
        (Fraction(-3, 4), "(- 0.75)"),
        (Fraction(7), "7.0"),
        (Fraction(1, 3), "(/ 1.0 3.0)"),
        (Fraction(-2, 7), "(- (/ 2.0 7.0))"),
        (Fraction(30000000000000001, 10**17), "0.30000000000000001"),
    ],
)
def test_rationals_are_written_exactly_in_smtlib(value, text):
    assert rational_term(value) == text


def test_a_conjunction_keeps_its_exact_right_hand_side_and_rounds_up_for_proofs():
    row = _at_least(TENTH)
    assert row.exact_b == (-TENTH,)
    assert Fraction(float(row.b_sound[0])) >= -TENTH
    assert not row.closes_at_zero()[0] or Fraction(float(row.b_sound[0])) != -TENTH
    assert row.holds_exactly([TENTH]) and not row.holds_exactly([TENTH - Fraction(1, 10**30)])


def test_a_strict_row_fails_at_equality_and_a_non_strict_one_holds():
    assert _at_least(Fraction(1)).holds_exactly([Fraction(1)])
    assert not _at_least(Fraction(1), strict=True).holds_exactly([Fraction(1)])
    assert _at_least(Fraction(1), strict=True).closes_at_zero()[0]
    assert not _at_least(Fraction(1), strict=True).is_unsafe(np.array([1.0]))
    assert _at_least(Fraction(1)).is_unsafe(np.array([1.0]))


def test_the_float_box_covers_the_exact_box_and_the_inner_box_lies_inside_it():
    prop = Property("p", [0.0], [0.1], (_at_least(Fraction(0)),), exact_lower=(Fraction(0),), exact_upper=(TENTH,))
    assert Fraction(float(prop.upper[0])) >= TENTH > Fraction(float(prop.inner_upper[0]))
    assert prop.contains_exactly(prop.inner_upper) and not prop.contains_exactly(prop.upper)


def test_an_open_bound_excludes_its_endpoint():
    prop = Property("p", [0.0], [1.0], (_at_least(Fraction(0)),), open_upper=(True,))
    assert not prop.contains_exactly(np.array([1.0])) and prop.inner_upper[0] < 1.0


def test_a_sub_box_never_grows_beyond_the_exact_box():
    prop = Property("p", [0.0], [0.1], (_at_least(Fraction(0)),), exact_lower=(Fraction(0),), exact_upper=(TENTH,))
    sub = prop.restricted(np.array([0.05]), prop.upper)
    assert sub.exact_upper == (TENTH,) and sub.exact_lower == (Fraction(0.05),)


def test_a_witness_meeting_a_strict_row_with_equality_is_rejected():
    prop = Property("p", [0.0], [1.0], (_at_least(Fraction(1), strict=True),))
    validation = validate_counterexample(_identity(), prop, np.array([1.0]))
    assert not validation.ok
    assert "a strict row holds only with equality" in validation.reason


def test_a_witness_outside_the_exact_box_is_clipped_into_it_first():
    """x <= 1/10 exactly: the float 0.1 lies above it, so the checked point is the float just below."""
    prop = Property("p", [0.0], [0.1], (_at_least(Fraction(0)),), exact_lower=(Fraction(0),), exact_upper=(TENTH,))
    validation = validate_counterexample(_identity(), prop, np.array([0.1]))
    assert validation.ok and Fraction(float(validation.x[0])) < TENTH


def test_a_witness_only_the_floats_accept_is_rejected():
    """y = x + 2^-60 at x = 1: float64 and float32 round y to 1, exactly it is above 1, so y <= 1 misses."""
    network = Network((AffineLayer(np.array([[1.0]]), np.array([2.0**-60]), "y = x + tiny"),))
    at_most_one = Conjunction([[1.0]], [1.0], ("y0 <= 1",))
    prop = Property("p", [1.0], [1.0], (at_most_one,))
    validation = validate_counterexample(network, prop, np.array([1.0]))
    assert not validation.ok
    assert validation.reason.startswith("the floats accept the point but the exact outputs miss")


def test_the_smtlib_query_states_strict_rows_and_exact_constants():
    prop = Property(
        "p", [0.0], [0.1], (_at_least(TENTH, strict=True),), exact_lower=(Fraction(0),), exact_upper=(TENTH,)
    )
    script = smtlib_script(_identity(), prop)
    assert "(assert (and (<= 0.0 X_0) (<= X_0 0.1)))" in script
    assert "(assert (< (- Y_0) (- 0.1)))" in script


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["auto", "z3", "bounds"])
def test_a_decimal_bound_a_float_rounds_onto_the_threshold_is_never_violated(engine):
    """y = x over x <= 1/10 exactly, unsafe y >= 0.1 (the float64 0.1, just above 1/10): unsat exactly.

    Reading the box bound as the float 0.1 would make x = 0.1 a witness.
    """
    prop = Property("p", [0.0], [0.1], (_at_least(Fraction(0.1)),), exact_lower=(Fraction(0),), exact_upper=(TENTH,))
    result = check(_identity(), prop, engine=engine, timeout=0.5 if engine == "bounds" else 20, jobs=1)
    assert result.verdict != "violated", result.reason
    if engine != "bounds":
        assert result.verdict == "proved", result.reason


@pytest.mark.parametrize("engine", ["auto", "z3"])
def test_a_strict_threshold_reached_only_with_equality_is_proved(engine):
    """y = x on [0, 1], unsafe y > 1: the only candidate x = 1 meets it with equality, so it holds."""
    prop = Property("p", [0.0], [1.0], (_at_least(Fraction(1), strict=True),))
    result = check(_identity(), prop, engine=engine, timeout=20, jobs=1)
    assert result.verdict == "proved", result.reason

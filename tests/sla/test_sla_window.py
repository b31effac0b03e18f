"""The ring buffers: nearest rank, exact sums, eviction, compact entries and copies."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from certfsm.sla._window import nearest_rank
from certfsm.sla._window import SortedWindow, SumWindow, ViolationWindow, exact_units, limit_in_units

NEXT_ONE = math.nextafter(1.0, math.inf)


@pytest.mark.parametrize(
    "q, n, rank",
    [
        (50, 1, 1),
        (50, 2, 1),
        (50, 3, 2),
        (50, 4, 2),
        (95, 1, 1),
        (95, 19, 19),
        (95, 20, 19),
        (95, 21, 20),
        (99, 1, 1),
        (99, 99, 99),
        (99, 100, 99),
        (99, 101, 100),
        (99, 1000, 990),
    ],
)
def test_nearest_rank_is_the_ceiling_of_q_n_over_100(q, n, rank):
    assert nearest_rank(q, n) == rank == max(1, math.ceil(Fraction(q * n, 100)))


@pytest.mark.parametrize(
    "x, units",
    [
        (5e-324, 1),
        (1.0, 2**1074),
        (-2.5, -5 * 2**1073),
        (0.0, 0),
        (1.7976931348623157e308, (2**53 - 1) * 2 ** (1023 - 52 + 1074)),
    ],
)
def test_exact_units_counts_the_smallest_float64_steps(x, units):
    assert exact_units(x) == units
    assert Fraction(units, 2**1074) == Fraction(x)


def test_sorted_window_percentiles_follow_the_last_cycles():
    window = SortedWindow(5)
    for sample in (5.0, 1.0, 4.0, 2.0, 3.0):
        window.push(sample)
    assert (window.percentile(50), window.percentile(95), window.percentile(99)) == (3.0, 5.0, 5.0)
    window.push(None)  # evicts 5.0; a cycle without a sample still takes a slot
    assert window.count == 4 and window.ordered == [1.0, 2.0, 3.0, 4.0]
    assert (window.percentile(50), window.percentile(95)) == (2.0, 4.0)
    for _ in range(5):
        window.push(None)
    assert window.count == 0 and window.percentile(50) is None


def test_sorted_window_removes_one_of_equal_samples():
    window = SortedWindow(3)
    for sample in (2.0, 2.0, 1.0, 2.0):
        window.push(sample)
    assert window.ordered == [1.0, 2.0, 2.0] and window.entries() == [2.0, 1.0, 2.0]


def units(limit) -> tuple[int, int]:
    """A limit (a float's binary value, or a rational) as `mean_exceeds` takes it."""
    return limit_in_units(Fraction(limit))


def test_mean_is_exact_where_float_sums_are_not():
    window = SumWindow(4)
    for sample in (1e308, 1e308, 1e308):
        window.push(sample)
    assert sum([1e308] * 3) == math.inf
    assert window.mean() == 1e308 and not window.mean_exceeds(*units(1e308))
    assert window.mean_exceeds(*units(math.nextafter(1e308, 0)))
    assert window.mean_exceeds(*units(Fraction(10) ** 308))  # the float 1e308 is above the decimal 1e308
    ties = SumWindow(3)
    for sample in (1.0, 1.0, NEXT_ONE):
        ties.push(sample)
    assert ties.mean() == 1.0  # the correctly rounded mean ties the limit ...
    assert ties.mean_exceeds(*units(1.0))  # ... but the exact mean is above it
    tenths = SumWindow(2)
    tenths.push(0.1)
    tenths.push(0.2)
    assert tenths.mean() == float((Fraction(0.1) + Fraction(0.2)) / 2)
    assert tenths.mean_exceeds(*units(0.15)) and not tenths.mean_exceeds(*units(0.15000000000000002))
    assert tenths.mean_exceeds(*units(Fraction(3, 20)))  # the floats 0.1 and 0.2 are above the decimals they print as
    for _ in range(2):
        tenths.push(None)
    assert tenths.mean() is None and not tenths.mean_exceeds(*units(-1.0)) and tenths.units == 0


def test_mean_of_samples_that_are_not_floats_is_exact_and_leaves_no_trace():
    window = SumWindow(3)
    for sample in (Fraction(1, 10), 0.5, Fraction(1, 3)):
        window.push(sample)
    exact = (Fraction(1, 10) + Fraction(1, 2) + Fraction(1, 3)) / 3
    assert window.mean() == float(exact)
    assert not window.mean_exceeds(*units(exact)) and window.mean_exceeds(*units(exact - Fraction(1, 10**40)))
    for sample in (0.25, 0.25, 0.25):  # the Fractions leave: the exact part is zero again, the sum all floats
        window.push(sample)
    assert window.extra == 0 and window.units == 3 * exact_units(0.25) and window.mean() == 0.25
    assert not window.mean_exceeds(*units(0.25)) and window.mean_exceeds(*units(math.nextafter(0.25, 0)))


def test_sorted_window_orders_floats_and_fractions_together_exactly():
    window = SortedWindow(4)
    third = Fraction(1, 3)
    for sample in (0.5, third, float(third), Fraction(1, 10)):
        window.push(sample)
    assert window.ordered == [Fraction(1, 10), float(third), third, 0.5]  # float(1/3) is just below 1/3
    window.push(0.2)  # evicts 0.5
    window.push(0.2)  # evicts the Fraction 1/3, not the float beside it
    assert window.ordered == [Fraction(1, 10), 0.2, 0.2, float(third)]


def test_violation_window_counts_the_last_cycles():
    window = ViolationWindow(3)
    assert [window.push(v) for v in (True, False, True, True, False, False, False)] == [1, 1, 2, 2, 2, 1, 0]


@pytest.mark.parametrize(
    "make, pushes, entries",
    [
        (lambda: ViolationWindow(4), [True, False, True], [True, False, True]),
        (lambda: ViolationWindow(4), [False, False, True, False], [True, False]),
        (lambda: ViolationWindow(2), [True, True, False, True], [True]),
        (lambda: ViolationWindow(3), [False, False, False, False], []),
        (lambda: SortedWindow(4), [None, 2.0, None, 1.0], [2.0, None, 1.0]),
        (lambda: SortedWindow(2), [3.0, 2.0, 1.0], [2.0, 1.0]),
        (lambda: SumWindow(3), [1.0, None, None, None], []),
        (lambda: SumWindow(3), [1.0, None, 2.5, None, None], [2.5, None, None]),
    ],
)
def test_entries_drop_leading_empty_cycles_and_load_restores_the_state(make, pushes, entries):
    window = make()
    for value in pushes:
        window.push(value)
    assert window.entries() == entries
    restored = make()
    restored.load(entries)
    assert restored.entries() == entries and restored.count == window.count
    for other in (restored, window):  # both continue alike
        for value in pushes:
            other.push(value)
    assert restored.entries() == window.entries() and restored.count == window.count
    if isinstance(window, SortedWindow):
        assert restored.ordered == window.ordered
    if isinstance(window, SumWindow):
        assert restored.units == window.units


@pytest.mark.parametrize(
    "make, value", [(lambda: ViolationWindow(3), True), (lambda: SortedWindow(3), 1.0), (lambda: SumWindow(3), 1.0)]
)
def test_copies_share_nothing(make, value):
    window = make()
    window.push(value)
    clone = window.copy()
    clone.push(value)
    clone.push(value)
    assert window.count == 1 and clone.count == 3
    assert window.entries() == [value]

"""What a metric value gives a path: a sample or none, and how a sample is compared with a limit exactly.

A *sample* is a real number x with 0 <= x <= the largest float64, read
exactly: a float means the binary rational it holds, an int, a Fraction,
a Decimal or a numpy number the value it denotes. A value that is absent,
None, NaN, infinite, negative or beyond float64's range gives no sample,
and the cycle is a violation (`certfsm.sla._path`): a latency below zero
is what a clock that stepped back measures, a fault and not a fast
answer. -0.0 equals 0.0 and is a valid zero, read as 0.0. A value that
is not a number at all (a str, a bool, a complex, an object) is the
caller's mistake and refused with TypeError.

Samples are canonical: a float when the value is a float64 (never -0.0),
else a Fraction, so equal samples are equal objects of one type, a window
of floats stays all floats, and the sorted window depends only on the
multiset of values.

A limit is the exact decimal written in the spec (`certfsm.decimal_value`:
0.1 means 1/10). For a float sample s, s <= d exactly when
s <= float_at_most(d), so a path compares float samples with that float,
computed once (`limit_sides`), and only a Fraction sample with d itself.
A float sample equal to the float nearest a decimal limit may lie above
it: the float 0.1 is 0.1000000000000000055..., above the limit 0.1, so it
is a violation, while the float 0.3 (0.2999999999999999888...) is within
the limit 0.3.
"""

from __future__ import annotations

import math
import numbers
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any, Union

from certfsm import decimal_value, float_at_most

Sample = Union[float, Fraction]
"""A canonical sample: a float when the value is a float64, else a Fraction."""

FLOAT_MAX = sys.float_info.max
_EXACT_MAX = Fraction(FLOAT_MAX)
_INF = math.inf


def read_metric(name: str, value: Any) -> Sample | None:
    """The sample `value` gives (see the module docstring), or None for no sample; TypeError for a non-number."""
    if type(value) is float:  # the common case first: one chained comparison refuses NaN, negatives and +-inf
        return value + 0.0 if 0.0 <= value < _INF else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(
            f"metrics[{name!r}]={value!r} is a {type(value).__name__}, not a number; "
            "give a float, or None when the metric was not measured"
        )
    exact = exact_value(name, value)
    if exact is None or exact < 0 or exact > _EXACT_MAX:
        return None
    return canonical(exact)


def exact_value(name: str, value: Any) -> Fraction | None:
    """The rational a real number denotes, None for NaN or an infinity; TypeError when it cannot be read exactly."""
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    ratio = getattr(value, "as_integer_ratio", None)  # float and its numpy kin, Decimal
    if ratio is None:
        raise TypeError(
            f"metrics[{name!r}]={value!r} is a {type(value).__name__}, a number that cannot be read "
            "exactly; give a float, an int, a Fraction or a Decimal"
        )
    try:
        numerator, denominator = ratio()
    except (ValueError, OverflowError):  # NaN (ValueError) or an infinity (OverflowError)
        return None
    return Fraction(numerator, denominator)


def canonical(exact: Fraction) -> Sample:
    """`exact` (0 <= exact <= FLOAT_MAX) as a float when it is a float64, else itself."""
    nearest = float(exact)
    return nearest + 0.0 if nearest == exact else exact


def limit_sides(limit: Any) -> tuple[Fraction, float]:
    """(the exact decimal d a limit denotes, float_at_most(d)): a float s is <= d exactly when s <= the second."""
    exact = decimal_value(limit)
    if abs(exact) > _EXACT_MAX:  # a limit beyond float64's range: every float is below it, or none is
        return exact, FLOAT_MAX if exact > 0 else -_INF
    return exact, float_at_most(exact)


def exceeds(sample: Sample, at_most: float, exact: Fraction) -> bool:
    """Whether the sample is above the limit whose `limit_sides` are (exact, at_most), compared exactly."""
    return sample > at_most if type(sample) is float else sample > exact

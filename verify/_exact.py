"""Exact rationals for binary floats, in Python and in SMT-LIB form.

Every finite binary float is m / 2^k, so its decimal expansion is finite
(at most a few hundred digits for float64 subnormals). Writing that
expansion, never a rounded ``repr``, is what lets an SMT-LIB file and the
Z3 back-end check exactly the numbers stored in the network IR.
`decimal.Decimal(float)` converts without rounding, so it does the work.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction


def _checked(x) -> float:
    value = float(x)
    if not math.isfinite(value):
        raise ValueError(f"x={value!r} is not a finite float; only finite floats have an exact rational value")
    return value


def exact_fraction(x) -> Fraction:
    """The exact rational value of a finite float (Python, numpy float64 or float32)."""
    return Fraction(_checked(x))


def exact_decimal(x) -> str:
    """The exact value of a finite float as an SMT-LIB decimal term.

    Non-negative values are plain decimals with at least one digit after
    the point ("0.0", "3.0", "0.1000000000000000055511151231257827021181583404541015625");
    negative values are wrapped as "(- 0.5)" because SMT-LIB has no
    negative literals. Negative zero is "0.0". Invariant:
    ``Fraction(exact_decimal(x).strip("(- )")) == abs(Fraction(x))``.
    """
    value = _checked(x)
    digits = format(Decimal(abs(value)), "f")
    if "." not in digits:
        digits += ".0"
    return f"(- {digits})" if value < 0 else digits

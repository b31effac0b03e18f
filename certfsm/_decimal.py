"""Spec constants as the exact decimals written, and floats on the sound side of a rational: standard library only.

docs/semantics.md, "Decimal constants": every number of a spec is the
exact decimal written. certfsm carries such a constant as the float64
whose shortest ``repr`` is that decimal (the spec reader refuses any
other), so one rule turns a carried float back into its exact value
(`decimal_value`), and a numeric comparison with a reading uses the
float on the sound side of it (`float_at_least`, `float_at_most`): a
float r satisfies r >= e exactly when r >= float_at_least(e), and r <= e
exactly when r <= float_at_most(e).

The machine decoder, which runs on targets without numpy, builds on this
module, so it imports nothing but the standard library.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction


def decimal_value(number: float | Fraction) -> Fraction:
    """The exact value a spec constant denotes: the decimal of its shortest ``repr`` (0.1 means 1/10).

    An int means itself and a Fraction is already exact. The spec reader
    accepts only the numbers for which this is the decimal written
    (`is_spec_decimal`), so nothing is lost between the file and here.
    """
    if isinstance(number, Fraction):
        return number
    if isinstance(number, int) and not isinstance(number, bool):
        return Fraction(number)
    return Fraction(repr(float(number)))


def is_spec_decimal(text: str) -> bool:
    """The JSON number `text` is finite and the same decimal as its float64's shortest ``repr``."""
    value = float(text)
    # Decimal compares exactly and in time bounded by the digits, whatever the exponent (1e-999999999).
    return math.isfinite(value) and Decimal(text) == Decimal(repr(value))


def float_at_least(value: Fraction) -> float:
    """The smallest float64 that is >= `value` (so a bound rounded up never cuts off a real point)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= value else math.nextafter(nearest, math.inf)


def float_at_most(value: Fraction) -> float:
    """The largest float64 that is <= `value`."""
    nearest = float(value)
    return nearest if Fraction(nearest) <= value else math.nextafter(nearest, -math.inf)

"""Exact rationals: binary floats and decimal constants, in Python and in SMT-LIB form.

Every finite binary float is m / 2^k, so its decimal expansion is finite
(at most a few hundred digits for float64 subnormals). Writing that
expansion, never a rounded ``repr``, is what lets an SMT-LIB file and the
Z3 back-end check exactly the numbers stored in the network IR.
`decimal.Decimal(float)` converts without rounding, so it does the work.

A property's constants are exact rationals (a VNN-LIB ``0.1`` is 1/10,
not the float64 next to it). Numeric engines see them rounded in the
sound direction (`float_at_least`, `float_at_most`); the exact oracle
(`exact_outputs`) evaluates the network on rationals, so a witness is
judged under the semantics DESIGN fixes, not under float rounding.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np


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
    digits = plain_decimal(abs(value))
    return f"(- {digits})" if value < 0 else digits


def plain_decimal(x) -> str:
    """The exact value of a finite float as a plain decimal ("-0.5", "3.0"): what a witness prints.

    Reading the text back as an exact decimal gives the float's value, so
    the printed point is the point that was checked, bit for bit.
    """
    value = _checked(x)
    digits = format(Decimal(value), "f")
    if "." not in digits:
        digits += ".0"
    return "0.0" if value == 0 else digits


def rational_term(value: Fraction) -> str:
    """An exact rational as an SMT-LIB term: a decimal when it has a finite one, else ``(/ n d)``."""
    value = Fraction(value)
    magnitude = abs(value)
    denominator = magnitude.denominator
    twos = (denominator & -denominator).bit_length() - 1
    rest = denominator >> twos
    fives = 0
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    if rest == 1:
        places = max(twos, fives)
        scaled = magnitude.numerator * 10**places // denominator
        whole, fraction = divmod(scaled, 10**places)
        text = f"{whole}.{str(fraction).rjust(places, '0') if places else '0'}"
    else:
        text = f"(/ {magnitude.numerator}.0 {denominator}.0)"
    return f"(- {text})" if value < 0 else text


def float_at_least(value: Fraction) -> float:
    """The smallest float64 that is >= `value` (so a bound rounded up never cuts off a real point)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= value else float(np.nextafter(nearest, np.inf))


def float_at_most(value: Fraction) -> float:
    """The largest float64 that is <= `value`."""
    nearest = float(value)
    return nearest if Fraction(nearest) <= value else float(np.nextafter(nearest, -np.inf))


def exact_outputs(network, x) -> list[Fraction]:
    """The network's scores at the float point `x`, in exact rational arithmetic.

    Every weight is read as the rational its float denotes (the DESIGN
    semantics). Fractions of dyadic numbers stay dyadic, so this is exact
    and, for the sizes certfsm verifies (ACAS Xu: 300 ReLUs), takes
    milliseconds to a few tenths of a second.
    """
    values = [exact_fraction(v) for v in np.asarray(x, dtype=np.float64).reshape(-1)]
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        weights = layer.exact_weight()
        biases = layer.exact_bias()
        values = [sum((w * v for w, v in zip(row, values) if w), bias) for row, bias in zip(weights, biases)]
        if index < last:
            values = [v if v > 0 else Fraction(0) for v in values]
    return values

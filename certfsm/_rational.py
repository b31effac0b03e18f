"""Exact rationals for the core and verify alike: float arrays read exactly, integer forms, sound rounding.

Every finite float is a rational; these helpers let the ONNX fold, the
network IR and the exact evaluation of a witness work with those values
exactly, and turn a rational back into a float64 on the side a bound
needs. Arrays of Fractions are numpy object arrays, so the fold can run
the same code on floats and on rationals.
"""

from __future__ import annotations

import math
from fractions import Fraction

from typing import TYPE_CHECKING

import numpy as np

from ._decimal import float_at_least, float_at_most  # noqa: F401  (their home is the stdlib-only _decimal)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def rational_array(array: ArrayLike) -> np.ndarray:
    """The exact values of a float (or already rational) array, as an object array of Fractions."""
    array = np.asarray(array)
    if array.dtype == object:
        return array
    flat = [Fraction(*float(v).as_integer_ratio()) for v in array.reshape(-1)]
    result = np.empty(len(flat), dtype=object)
    result[:] = flat
    return result.reshape(array.shape)


def integer_form(values: ArrayLike) -> tuple[np.ndarray, int]:
    """Rationals as integer numerators (an object array of the same shape) over their least common denominator.

    What makes exact arithmetic fast: a matrix product of the numerators
    is one numpy product of Python integers, not a Fraction per term.
    """
    values = np.asarray(values, dtype=object)
    flat = values.reshape(-1)
    denominator = math.lcm(*(v.denominator for v in flat)) if flat.size else 1
    numerators = np.empty(flat.shape, dtype=object)
    numerators[:] = [v.numerator * (denominator // v.denominator) for v in flat]
    return numerators.reshape(values.shape), denominator

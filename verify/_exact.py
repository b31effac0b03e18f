"""Exact rationals: binary floats and decimal constants, in Python and in SMT-LIB form.

Every finite binary float is m / 2^k, so its decimal expansion is finite
(at most a few hundred digits for float64 subnormals). Writing that
expansion, never a rounded ``repr``, is what lets an SMT-LIB file and the
Z3 back-end check exactly the numbers stored in the network IR.
`decimal.Decimal(float)` converts without rounding, so it does the work.

A property's constants are exact rationals (a VNN-LIB ``0.1`` is 1/10,
not the float64 next to it). Numeric engines see them rounded in the
sound direction (`certfsm.float_at_least`, `float_at_most`); the exact
oracle (`exact_outputs`) evaluates the network on rationals, so a
witness is judged under the exact semantics (docs/semantics.md,
"Counterexamples"), not under float rounding.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from certfsm import integer_form, rational_array


def _checked(x) -> float:
    value = float(x)
    if not math.isfinite(value):
        raise ValueError(f"x={value!r} is not a finite float; only finite floats have an exact rational value")
    return value


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


def exact_outputs(network, x) -> list[Fraction]:
    """The network's scores at the float point `x`, in exact rational arithmetic.

    Every weight is read as the rational its float denotes, or as the
    layer's exact rationals where a fold rounded (docs/semantics.md,
    "The network").
    The work is done on integers: each layer's weights and biases are kept
    as integer numerators over one common denominator (`_integer_layer`,
    computed once per layer), so a layer is one matrix product of Python
    integers (numpy object arrays) instead of a Fraction per weight:
    milliseconds for ACAS Xu, a fraction of a second for 250 000 weights.
    Each activation keeps its own denominator; a layer that reads several
    (a graph network) brings them to their least common multiple first.
    """
    activations = [integer_form(rational_array(np.asarray(x, dtype=np.float64).reshape(-1)))]
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        numerators, denominator = _gathered(network, index, activations)
        weight, weight_denominator, bias, bias_denominator = _integer_layer(layer)
        product = weight.dot(numerators) if weight.size else np.zeros(weight.shape[0], dtype=object)
        scale = weight_denominator * denominator
        common = math.lcm(scale, bias_denominator)
        numerators = product * (common // scale) + bias * (common // bias_denominator)
        if index < last:
            numerators = np.array([v if v > 0 else 0 for v in numerators], dtype=object)
        activations.append((numerators, common))
    scores, denominator = activations[-1]
    return [Fraction(int(v), denominator) for v in scores]


def _gathered(network, index: int, activations: list) -> tuple[np.ndarray, int]:
    """Layer `index`'s input as (integer numerators, one denominator): what it reads, over their lcm.

    `activations[r]` is (numerators, denominator) of activation r. A chain
    layer reads one activation and gets it as it is.
    """
    chosen = network.reads[index]
    if len(chosen) == 1:
        return activations[chosen[0]]
    denominator = math.lcm(*(activations[r][1] for r in chosen))
    scaled = {r: activations[r][0] * (denominator // activations[r][1]) for r in chosen}
    return network.gather(index, scaled), denominator


def _integer_layer(layer) -> tuple[np.ndarray, int, np.ndarray, int]:
    """(weight numerators (n_out, n_in), their denominator, bias numerators, their denominator), cached."""
    cached = getattr(layer, "_integer_form", None)
    if cached is None:
        if layer.is_exact:
            weights, biases = rational_array(layer.weight), rational_array(layer.bias)
        else:
            weights = rational_array_of(layer.exact_weight(), layer.weight.shape)
            biases = rational_array_of(layer.exact_bias(), layer.bias.shape)
        weight, weight_denominator = integer_form(weights)
        bias, bias_denominator = integer_form(biases)
        cached = (weight, weight_denominator, bias, bias_denominator)
        object.__setattr__(layer, "_integer_form", cached)
    return cached


def rational_array_of(values, shape) -> np.ndarray:
    """Nested tuples of Fractions (a layer's exact weights) as an object array of `shape`."""
    result = np.empty(math.prod(shape), dtype=object)
    result[:] = [v for row in values for v in row] if len(shape) == 2 else list(values)
    return result.reshape(shape)

"""Optimised relaxation slopes (alpha-CROWN style) and row combinations for the objective bound.

Why: on the long ACAS Xu proofs (4_2 and 3_3 x property 2) input
splitting stalls on boxes that only about ten ReLUs are unstable on: the
fixed lower slopes of `_bounds` (0, 1 or ``u/(u-l)`` for every unstable
neuron at once) leave a gap of a few 1e-3 where the true margin is about
1e-3, and halving the box does not close it for 30 more levels. A few
projected-gradient steps on the lower slopes, one slope per neuron and per
objective row, close those boxes at once (measured: 5-10 steps close all of
them).

What is optimised. The lower bound of one objective row ``c . y - e`` by
back-substitution (see `_bounds._backward`) is, for fixed hidden-layer
bounds, a piecewise-polynomial function of the lower slopes ``alpha`` of
the unstable neurons (upper lines stay the triangle's); it is not concave
across layers, so the steps find a good point, not the best. Any
``alpha`` in [0, 1] gives a sound bound, since ``relu(z) >= alpha z`` for
every real z and every alpha in [0, 1]; so every iterate is a bound and
the best one per row is kept. The gradient is exact (a reverse pass over
the same back-substitution, no autodiff library), and the step is Adam's.
A search can start from any numbers (a parent box's slopes, stored as
float32): they are clipped to [0, 1], and the slopes of neurons stable on
the box are replaced by the exact ones, so the start is as sound as any
iterate.

Row combinations. An unsafe disjunct is a conjunction ``A y <= b``; it is
refuted on a box as soon as some ``lambda >= 0`` has ``lambda . (A y - b)
> 0`` on the whole box (then some row is positive at every point). A
single row is the special case lambda = a unit vector, the start point;
the combination is optimised with the slopes (projected onto lambda >= 0,
sum 1). Where the maximising row changes inside a box, no single row is
positive on the whole box, yet a combination can be.

Soundness in floating point. The hidden-layer bounds come from `_bounds`
(true bounds, widened for rounding). The combined row ``c = lambda . A``
and ``e = lambda . b`` are computed in float64; the bound computed for
``c . y - e`` is a float evaluation of the same kind of expression
`_bounds` bounds (sums of products, slopes in [0, 1]), so its rounding
error is within ``ROUNDING_TOLERANCE * (1 + S)`` with ``S = m . |c| + |e|``
(``m`` the output magnitude, see `_bounds`); the error of forming ``c`` and
``e`` themselves moves the function by at most ``gamma_R (|lambda| . |A|)
. |y| + gamma_R |lambda| . |b|`` with ``|y| <= m``, R the number of rows.
Since ``|c| <= |lambda| . |A|`` up to the same few ulps, widening by
``ROUNDING_TOLERANCE * (1 + 2 (m . (|lambda| . |A|) + |lambda| . |b|))``
covers both. A bound above zero after that widening refutes the disjunct
for the exact network.
"""

from __future__ import annotations

import math
import time

import numpy as np

from certfsm import EngineError, Network

from ._bounds import (
    ROUNDING_TOLERANCE,
    LayerBounds,
    output_magnitude,
    preactivation_bounds,
)
from ._property import Property, check_fits
from ._result import PROVED, UNKNOWN, Result

ENGINE = "slopes"
COMPLETE = False
STEPS = 10
CHECK_STEPS = 40
LEARNING_RATE = 0.2
COMBINATION_RATE = 0.2
_BETAS = (0.9, 0.999)
_CHUNK_ROWS = 2048


def _bound_and_gradients(network, hidden, rows, constants, owner, alphas, centre, radius):
    """Lower bound of each flat row p (coefficients on the last layer's input), and its gradients.

    Returns the bound (P,), the gradient with respect to each layer's lower
    slopes (list of (P, n_k), zero where the slope is not used) and the
    gradient with respect to the starting row (P, n_in of the last layer),
    for the combination weights.

    The bound is `_bounds._backward`'s, one coefficient block per
    activation. The reverse pass keeps one adjoint per activation (the
    derivative of the bound by that activation's block): a layer's block
    was pushed into the blocks of the activations it reads, so the adjoint
    of its product is their adjoints gathered (`Network.gather`). Going up
    the layers, every activation a layer reads already has its adjoint.
    """
    top = len(hidden) - 1
    last = top + 1
    constant = np.array(constants, dtype=np.float64)
    blocks: list = [None] * (top + 2)
    network.scatter(last, rows, blocks)
    saved: list = [None] * (top + 1)
    for index in range(top, -1, -1):
        coefficients, blocks[index + 1] = blocks[index + 1], None
        if coefficients is None:
            continue
        below, layer = hidden[index], network.layers[index]
        positive = coefficients > 0.0
        intercept = below.upper_intercept[owner]
        constant += np.einsum("pn,pn->p", np.minimum(coefficients, 0.0), intercept)
        slope = np.where(positive, alphas[index], below.upper_slope[owner])
        through = coefficients * slope
        saved[index] = (coefficients, positive, slope, intercept)
        constant += through @ layer.bias
        network.scatter(index, through @ layer.weight, blocks)
    box_centre, box_radius = centre[owner], radius[owner]
    coefficients = blocks[0]
    bound = np.sum(coefficients * box_centre - np.abs(coefficients) * box_radius, axis=1) + constant
    adjoints: list = [box_centre - np.sign(coefficients) * box_radius] + [None] * (top + 1)
    gradients: list = [None] * (top + 1)
    readers = network.last_readers()
    for index in range(top + 1):
        if saved[index] is None:
            gradients[index] = np.zeros((owner.shape[0], hidden[index].low.shape[1]))
            continue
        layer = network.layers[index]
        adjoint_through = network.gather(index, adjoints) @ layer.weight.T + layer.bias
        network.release(index, readers, adjoints)
        coefficients, positive, slope, intercept = saved[index]
        gradients[index] = np.where(positive, adjoint_through * coefficients, 0.0)
        adjoints[index + 1] = adjoint_through * slope + np.where(coefficients < 0.0, intercept, 0.0)
    return bound, gradients, network.gather(last, adjoints)


def optimised_disjunct_bounds(
    network: Network,
    hidden: list[LayerBounds],
    lowers: np.ndarray,
    uppers: np.ndarray,
    A: np.ndarray,
    b: np.ndarray,
    start: np.ndarray,
    steps: int = STEPS,
    warm: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sound lower bounds ``v`` (B,) of ``lambda . (A y - b)`` over each box, with lambda (B, R) and the slopes (B, N).

    `A` (R, n_out), `b` (R,): one conjunction of the unsafe set.
    `hidden`: the boxes' hidden-layer bounds (from `_bounds`). `start`
    (B,): the row of `A` to start from in each box (its best single row);
    the first iterate is that row with `_bounds`' adaptive slopes. `warm`:
    instead start from these weights and lower slopes (packed over the
    hidden layers, as returned), e.g. those optimised for a parent box;
    they are projected back to [0, 1] and the slopes of neurons that are
    stable on the box are replaced by the exact ones. lambda is >= 0 with
    sum 1, so ``v > 0`` refutes the conjunction on the box. `steps` = 1
    only evaluates the start point.
    """
    lowers, uppers = np.atleast_2d(lowers), np.atleast_2d(uppers)
    count = lowers.shape[0]
    total = sum(h.low.shape[1] for h in hidden)
    result, weights, slopes = np.empty(count), np.empty((count, A.shape[0])), np.empty((count, total))
    for first in range(0, count, _CHUNK_ROWS):
        part = slice(first, first + _CHUNK_ROWS)
        chunk_hidden = [LayerBounds(h.low[part], h.high[part], h.magnitude[part]) for h in hidden]
        chunk_warm = None if warm is None else (warm[0][part], warm[1][part])
        result[part], weights[part], slopes[part] = _optimise(
            network, chunk_hidden, lowers[part], uppers[part], A, b, np.asarray(start)[part], steps, chunk_warm
        )
    return result, weights, slopes


def _optimise(network, hidden, lowers, uppers, A, b, start, steps, warm):
    count = lowers.shape[0]
    centre, radius = (lowers + uppers) / 2.0, (uppers - lowers) / 2.0
    last = network.layers[-1]
    top_rows, top_constants = A @ last.weight, A @ last.bias - b
    magnitude = output_magnitude(network, hidden, lowers, uppers)
    owner = np.arange(count)
    if warm is None:
        weights = np.zeros((count, A.shape[0]))
        weights[owner, start] = 1.0
    else:
        weights = _simplex(np.array(warm[0], dtype=np.float64))
    if not hidden:
        rows, constants = weights @ top_rows, weights @ top_constants
        bound = np.sum(rows * centre - np.abs(rows) * radius, axis=1) + constants
        return bound - _slack(weights, A, b, magnitude), weights, np.zeros((count, 0))
    unstable = [(h.low < 0.0) & (h.high > 0.0) for h in hidden]
    alphas = [h.lower_slope.copy() for h in hidden]
    if warm is not None:
        columns = np.cumsum([0] + [h.low.shape[1] for h in hidden])
        for index, mask in enumerate(unstable):
            given = np.clip(np.asarray(warm[1][:, columns[index] : columns[index + 1]], dtype=np.float64), 0.0, 1.0)
            alphas[index] = np.where(mask & np.isfinite(given), given, alphas[index])
    moments = [(np.zeros_like(a), np.zeros_like(a)) for a in alphas]
    weight_moments = (np.zeros_like(weights), np.zeros_like(weights))
    best, best_weights = np.full(count, -np.inf), weights.copy()
    best_alphas = [a.copy() for a in alphas]
    for step in range(1, max(steps, 1) + 1):
        bound, gradients, row_gradient = _bound_and_gradients(
            network, hidden, weights @ top_rows, weights @ top_constants, owner, alphas, centre, radius
        )
        bound = bound - _slack(weights, A, b, magnitude)
        better = bound > best
        best, best_weights = np.where(better, bound, best), np.where(better[:, None], weights, best_weights)
        best_alphas = [np.where(better[:, None], a, kept) for a, kept in zip(alphas, best_alphas)]
        if step >= steps:
            break
        for index, mask in enumerate(unstable):
            change = _adam(moments[index], np.where(mask, gradients[index], 0.0), step)
            alphas[index] = np.where(mask, np.clip(alphas[index] + LEARNING_RATE * change, 0.0, 1.0), alphas[index])
        if A.shape[0] > 1:
            weight_gradient = row_gradient @ top_rows.T + top_constants
            weights = _simplex(weights + COMBINATION_RATE * _adam(weight_moments, weight_gradient, step))
    return best, best_weights, np.concatenate(best_alphas, axis=1)


def _simplex(weights: np.ndarray) -> np.ndarray:
    """Weights clipped at 0 and scaled to sum 1 (uniform where they were all <= 0 or not finite)."""
    weights = np.where(np.isfinite(weights), np.maximum(weights, 0.0), 0.0)
    total = weights.sum(axis=1, keepdims=True)
    return np.where(total > 0.0, weights / np.where(total > 0.0, total, 1.0), 1.0 / weights.shape[1])


def _adam(moments: tuple[np.ndarray, np.ndarray], gradient: np.ndarray, step: int) -> np.ndarray:
    """Adam's normalised ascent direction; updates the running moments in place."""
    first, second = moments
    first *= _BETAS[0]
    first += (1.0 - _BETAS[0]) * gradient
    second *= _BETAS[1]
    second += (1.0 - _BETAS[1]) * gradient * gradient
    first_hat = first / (1.0 - _BETAS[0] ** step)
    second_hat = second / (1.0 - _BETAS[1] ** step)
    return first_hat / (np.sqrt(second_hat) + 1e-12)


def _slack(weights: np.ndarray, A: np.ndarray, b: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """The rounding widening of a combined row (see the module docstring), (B,)."""
    row_magnitude = np.abs(weights) @ np.abs(A)
    return ROUNDING_TOLERANCE * (1.0 + 2.0 * (np.sum(magnitude * row_magnitude, axis=1) + np.abs(weights) @ np.abs(b)))


def check(network: Network, prop: Property, timeout: float) -> Result:
    """Optimised bounds over the whole box: ``proved`` when every disjunct is refuted, else ``unknown``.

    The whole-box counterpart of `_bounds.check` with optimised slopes
    and row combinations; incomplete, never ``violated``.
    """
    started = time.monotonic()
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"slopes: timeout={timeout!r} is not a positive number of seconds; give e.g. timeout=60")
    check_fits(network, prop, "slopes")
    if not prop.unsafe:
        return Result(PROVED, ENGINE, time.monotonic() - started, reason="the unsafe set is empty")
    lowers, uppers = prop.lower[None], prop.upper[None]
    hidden = preactivation_bounds(network, lowers, uppers)
    best = []
    for conjunction in prop.unsafe:
        if conjunction.A.shape[0] == 0:
            best.append(-math.inf)
            continue
        start = np.zeros(1, dtype=np.int64)
        values = [
            optimised_disjunct_bounds(
                network, hidden, lowers, uppers, conjunction.A, conjunction.b_sound, start + row, CHECK_STEPS
            )[0][0]
            for row in range(conjunction.A.shape[0])
        ]
        best.append(float(max(values)))
    stats = {"best_disjunct_bounds": best}
    open_disjuncts = [index for index, value in enumerate(best) if not value > 0.0]
    seconds = time.monotonic() - started
    if not open_disjuncts:
        return Result(
            PROVED, ENGINE, seconds, reason="optimised bounds refute every disjunct on the whole box", stats=stats
        )
    first = open_disjuncts[0]
    return Result(
        UNKNOWN,
        ENGINE,
        seconds,
        reason=f"optimised bounds cannot refute unsafe[{first}] on the whole box (best bound {best[first]:.3g} <= 0)",
        stats=stats,
    )

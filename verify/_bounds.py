"""Sound bound propagation: interval and linear (CROWN / DeepPoly) bounds, batched over boxes.

Why: splitting an input box produces thousands of sub-boxes, and most of
them are closed by bounds alone, long before a complete engine is needed.
Everything here works on a batch of boxes at once (`lowers`, `uppers` of
shape (B, n_inputs)) so the cost is a few large matrix products per layer.

Method. Pre-activation bounds of every hidden layer come from a forward
linear pass (each neuron keeps a lower and an upper linear function of the
input, the ReLU triangle relaxation is applied to them and they are
concretised over the box), intersected with interval bounds; neurons
still unstable are then bounded by back-substitution to the input
(DeepPoly). The objective ``C @ y - d`` is bounded directly by
back-substitution from the objective (CROWN): the coefficient row of each
objective is pushed back through the layers, and at each ReLU the upper
line ``u/(u-l) (z - l)`` is used where the coefficient is negative and a
lower line ``alpha z`` where it is positive. Bounding ``c . y`` directly
is tighter than bounding each output and combining. alpha is 1 when
``u > -l``, else 0 (DeepPoly's choice) for the hidden layers; for the
objective, whose few rows are cheap, alpha = 0, 1 and ``u/(u-l)`` are
tried as well and the best bound per row is kept. Bounds already proved
for a containing box (`known`) are intersected in, so bounds never get
looser down a split tree.

Measured on ACAS Xu (5 inputs, 6 x 50 ReLUs): whole-box back-substitution
proves properties 3 and 4 outright, where forward-only linear bounds and
interval bounds are off by 2-3 orders of magnitude.

Soundness in floating point. The bounds are computed in float64 on
float64 weights (float32 values held exactly). Every computed number is a
sum of products of inputs, weights, biases, bounds and relaxation slopes
(each slope ``u/(u-l)`` carries a relative error of a few ulps, which
moves its line by at most that much times ``|u|``). For such an
expression the computed value differs from the exact one by at most
``gamma_K * S``, where ``gamma_K = K u / (1 - K u)``, ``u = 2**-53``, ``K``
is the number of chained operations (about layers x (widest layer input +
layers + 4): a few hundred here) and ``S`` is the same expression with
every term replaced by its absolute value. A per-neuron magnitude bounds
``S`` (`_next_magnitude`, `_activation_magnitude`): ``|W|`` applied to the
magnitudes of the activations the layer reads, concatenated, plus
``|b|``, starting from ``max(|lower|, |upper|)`` for the input. On a
graph network (a layer reading several earlier activations,
`Network.reads`) that is still one sum per neuron, over the
concatenation, and back-substitution adds the blocks that several layers
push into one activation: each addition is one more operation in ``K``
and every term of every path is counted in ``S``. Through a ReLU the
magnitude is 0 where the neuron is inactive (its coefficients are
exactly 0), unchanged where active (slope exactly 1), plus ``|l|`` where
unstable (the intercept ``s l``); a factor
2 for the concretisation ``c x - |c| r`` is covered by the margin. Every
computed bound is moved outward by ``ROUNDING_TOLERANCE * (1 + S)``, with
``ROUNDING_TOLERANCE = 1e-10`` at least 100 times ``2 gamma_K`` for K up
to 4000. Widened intermediate bounds are true bounds, so the relaxations
built from them are valid in exact arithmetic (induction over the
layers), and a widened objective lower bound above zero proves the
objective positive over the whole box for the exact (real-arithmetic)
network. Intersecting with bounds proved for a containing box, and taking
the best of several sound bounds, keeps them sound.

The argument does not depend on which lower slope an unstable neuron
gets: ``relu(z) >= alpha z`` holds for every real z and every alpha in
[0, 1], and a coefficient times such an alpha is no larger in magnitude
than the coefficient, so the same ``S`` (hence the same widening) covers
every choice. That is what lets `_slopes` optimise the slopes freely (it
clips them to [0, 1]) and keep the best iterate; its combinations of
objective rows add their own small term (see `_slopes`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from certfsm import EngineError, Network

from ._property import Property, check_fits
from ._result import PROVED, UNKNOWN, Result

ENGINE = "bounds"
COMPLETE = False
ROUNDING_TOLERANCE = 1e-10
_CHUNK_ROWS = 1024


def _as_batch(lowers: np.ndarray, uppers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lowers = np.atleast_2d(np.asarray(lowers, dtype=np.float64))
    uppers = np.atleast_2d(np.asarray(uppers, dtype=np.float64))
    if lowers.shape != uppers.shape:
        raise ValueError(f"box lowers shape {lowers.shape} does not match uppers shape {uppers.shape}")
    return lowers, uppers


def _next_magnitude(magnitude: np.ndarray, layer) -> np.ndarray:
    """Bound on the sum of absolute terms of a layer's pre-activation, from its input's bound.

    A layer whose floats only approximate its exact rational weights (a
    rounded fold, `AffineLayer.exact`) adds its approximation error,
    ``|dW| |x| + |db|``, divided by the tolerance: every slack derived
    from this magnitude then covers that error too, here and, through the
    propagated magnitudes, in every later layer and in the objective.
    """
    result = magnitude @ np.abs(layer.weight).T + np.abs(layer.bias)
    error = layer.rounding_error()
    if error is not None:
        weight_error, bias_error = error
        result = result + (magnitude @ weight_error.T + bias_error) / ROUNDING_TOLERANCE
    return result


def _activation_magnitude(magnitude: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Through a ReLU: zero where inactive (exact zero), unchanged where active, plus |l| where unstable."""
    return np.where(high <= 0.0, 0.0, np.where(low >= 0.0, magnitude, magnitude + np.abs(low)))


def _relaxation(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ReLU relaxation per neuron: lower slope alpha, upper slope s and upper intercept t.

    relu(z) >= alpha z and relu(z) <= s z + t for every z in [low, high].
    Inactive neurons (high <= 0) get all zeros, active ones (low >= 0)
    alpha = s = 1, t = 0; unstable ones the triangle with alpha 1 when
    high > -low (the smaller area), else 0.
    """
    active = low >= 0.0
    unstable = (low < 0.0) & (high > 0.0)
    width = np.where(unstable, high - low, 1.0)
    upper_slope = np.where(active, 1.0, np.where(unstable, high / width, 0.0))
    upper_intercept = np.where(unstable, -upper_slope * low, 0.0)
    lower_slope = np.where(active | (unstable & (high > -low)), 1.0, 0.0)
    return lower_slope, upper_slope, upper_intercept


def _concretise(coefficients: np.ndarray, constants: np.ndarray, centre: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """min over the box of coefficients . x + constants; coefficients (B, R, n), box (B, n)."""
    return (
        np.einsum("brn,bn->br", coefficients, centre)
        - np.einsum("brn,bn->br", np.abs(coefficients), radius)
        + constants
    )


@dataclass(frozen=True, eq=False)
class LayerBounds:
    """Sound bounds of one hidden layer's pre-activation over each box, (B, n_k) each.

    `magnitude` bounds the sum of absolute terms of anything computed from
    this layer's pre-activation onwards (see the module docstring); through
    the ReLU it scales the rounding tolerance of the layers that read it.
    """

    low: np.ndarray
    high: np.ndarray
    magnitude: np.ndarray
    lower_slope: np.ndarray = field(init=False, repr=False)
    upper_slope: np.ndarray = field(init=False, repr=False)
    upper_intercept: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        alpha, s, t = _relaxation(self.low, self.high)
        object.__setattr__(self, "lower_slope", alpha)
        object.__setattr__(self, "upper_slope", s)
        object.__setattr__(self, "upper_intercept", t)


def _backward(
    network: Network,
    hidden: list[LayerBounds],
    top: int,
    coefficients: np.ndarray,
    constants: np.ndarray,
    box: np.ndarray,
    lower_slopes: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Linear lower bounds of ``coefficients[p] . x + constants[p]`` as functions of the input, x the input of layer top + 1.

    On a chain x is ``relu(z_top)``; on a graph it is the concatenation of
    the activations layer top + 1 reads. `lower_slopes` (one (B, n_k)
    array per hidden layer, each entry in [0, 1]) replaces the adaptive
    lower relaxation slopes; any such choice is sound.

    Rows are flat: row p (coefficients (P, n_in of layer top + 1),
    constants (P,)) belongs to box `box[p]`, whose ReLU relaxations it goes
    through; `hidden` holds the bounds of hidden layers 0 .. top for every
    box. Returns the input coefficients (P, n_inputs) and constants (P,).
    Flat rows let each box carry only the rows it needs (its unstable
    neurons, its objectives).

    Graphs: one block of coefficients per activation. Going down the
    layers, hidden layer k relaxes its ReLU on the block of activation
    k + 1, and the product with its weight is split (`Network.scatter`)
    into the blocks of the activations the layer reads, added to what
    later layers put there. All of a block's contributions are in before
    it is used, since only later layers read an activation. On a chain
    each block is set once, never added to: the same products as a plain
    loop.
    """
    coefficients_out = np.empty((coefficients.shape[0], network.n_inputs))
    constants_out = np.array(constants, dtype=np.float64)
    for start in range(0, coefficients.shape[0], _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        owner = box[rows]
        offset = constants_out[rows]
        blocks: list[np.ndarray | None] = [None] * (top + 2)
        network.scatter(top + 1, coefficients[rows], blocks)
        for index in range(top, -1, -1):
            chunk, blocks[index + 1] = blocks[index + 1], None
            if chunk is None:
                continue
            below = hidden[index]
            negative = np.minimum(chunk, 0.0)
            offset += np.einsum("pn,pn->p", negative, below.upper_intercept[owner])
            alpha = below.lower_slope if lower_slopes is None else lower_slopes[index]
            chunk = (chunk - negative) * alpha[owner] + negative * below.upper_slope[owner]
            layer = network.layers[index]
            offset += chunk @ layer.bias
            network.scatter(index, chunk @ layer.weight, blocks)
        coefficients_out[rows] = blocks[0]
        constants_out[rows] = offset
    return coefficients_out, constants_out


def _concretise_flat(
    coefficients: np.ndarray, constants: np.ndarray, centre: np.ndarray, radius: np.ndarray
) -> np.ndarray:
    """min over box p of coefficients[p] . x + constants[p]; every argument has P rows."""
    return np.sum(coefficients * centre - np.abs(coefficients) * radius, axis=1) + constants


def preactivation_bounds(
    network: Network,
    lowers: np.ndarray,
    uppers: np.ndarray,
    method: str = "backward",
    known: np.ndarray | None = None,
    slope_choices: bool = False,
) -> list[LayerBounds]:
    """Sound pre-activation bounds of every hidden layer over each box.

    Every layer first gets forward linear bounds: each neuron carries a
    lower and an upper linear function of the input (kept as one array
    (B, n_in + 1, n_k) whose last row is the constant, so a layer is one
    large matrix product); at each ReLU the triangle relaxation maps them
    to the activation's linear bounds, and a layer of a graph network
    gathers those of the activations it reads. They are intersected with interval
    bounds. With method "backward" every neuron that is still unstable is
    then bounded by back-substitution to the input (DeepPoly), which is
    much tighter on deep layers; stable neurons need no more, since their
    relaxation is exact whatever their bounds. All bounds are widened by
    the rounding tolerance (see the module docstring).

    `known` (B, 2, N_hidden), as made by `pack`, holds bounds already
    proved for boxes containing these ones (a parent box): they are
    intersected in at every layer. That keeps bounds monotone down a
    split tree (the adaptive ReLU relaxation alone is not: a child box can
    otherwise get looser bounds than its parent).

    `slope_choices`: bound each unstable neuron also with the lower slopes
    0, 1 and the upper slope for the layers below it (`_slope_choices`)
    and keep the best; four times the back-substitution, worth it for
    boxes whose bounds many descendants inherit.
    """
    if method not in ("forward", "backward"):
        raise ValueError(f"method={method!r} is not 'forward' or 'backward'")
    lowers, uppers = _as_batch(lowers, uppers)
    batch, n_in = lowers.shape
    centre = (lowers + uppers) / 2.0
    radius = (uppers - lowers) / 2.0
    centre_1 = np.concatenate([centre, np.ones((batch, 1))], axis=1)
    radius_0 = np.concatenate([radius, np.zeros((batch, 1))], axis=1)
    reads = network.reads
    last_reader = network.last_readers(len(network.layers) - 1)
    # per activation (0 the input): interval bounds, magnitude and the forward linear functions
    # (None once no later hidden layer reads them); the input's functions are the identity
    box_lows, box_highs = [lowers], [uppers]
    magnitudes = [np.maximum(np.abs(lowers), np.abs(uppers))]
    identity = np.broadcast_to(np.eye(n_in + 1, n_in), (batch, n_in + 1, n_in))
    function_lows, function_highs = [identity], [identity]
    result: list[LayerBounds] = []
    offset = 0
    for index, layer in enumerate(network.layers[:-1]):
        magnitude = _next_magnitude(network.gather(index, magnitudes), layer)
        slack = ROUNDING_TOLERANCE * (1.0 + magnitude)
        box_low, box_high = network.gather(index, box_lows), network.gather(index, box_highs)
        mid = (box_low + box_high) / 2.0 @ layer.weight.T + layer.bias
        spread = (box_high - box_low) / 2.0 @ np.abs(layer.weight).T
        low_fn, high_fn = _forward_functions(network, index, function_lows, function_highs, batch)
        network.release(index, last_reader, box_lows, box_highs, magnitudes, function_lows, function_highs)
        forward_low = np.einsum("bik,bi->bk", low_fn, centre_1) - np.einsum("bik,bi->bk", np.abs(low_fn), radius_0)
        forward_high = np.einsum("bik,bi->bk", high_fn, centre_1) + np.einsum("bik,bi->bk", np.abs(high_fn), radius_0)
        low = np.maximum(mid - spread, forward_low)
        high = np.minimum(mid + spread, forward_high)
        columns = slice(offset, offset + layer.n_out)
        offset += layer.n_out
        if method == "backward" and reads[index] != (0,):
            widened_low, widened_high = low - slack, high + slack
            if known is not None:
                widened_low = np.maximum(widened_low, known[:, 0, columns])
                widened_high = np.minimum(widened_high, known[:, 1, columns])
            boxes, neurons = np.nonzero((widened_low < 0.0) & (widened_high > 0.0))
            if boxes.size:
                rows = np.concatenate([layer.weight[neurons], -layer.weight[neurons]])
                consts = np.concatenate([layer.bias[neurons], -layer.bias[neurons]])
                owner = np.concatenate([boxes, boxes])
                coef, const = _backward(network, result, index - 1, rows, consts, owner)
                bound = _concretise_flat(coef, const, centre[owner], radius[owner])
                if slope_choices:
                    for slopes in list(_slope_choices(result))[1:]:
                        coef, const = _backward(network, result, index - 1, rows, consts, owner, slopes)
                        bound = np.maximum(bound, _concretise_flat(coef, const, centre[owner], radius[owner]))
                count = boxes.size
                low[boxes, neurons] = np.maximum(low[boxes, neurons], bound[:count])
                high[boxes, neurons] = np.minimum(high[boxes, neurons], -bound[count:])
        low, high = low - slack, high + slack
        if known is not None:
            low = np.maximum(low, known[:, 0, columns])
            high = np.minimum(high, known[:, 1, columns])
        bounds = LayerBounds(low, high, magnitude)
        result.append(bounds)
        magnitudes.append(_activation_magnitude(magnitude, low, high))
        box_lows.append(np.maximum(low, 0.0))
        box_highs.append(np.maximum(high, 0.0))
        if index + 1 in last_reader:
            act_high = high_fn * bounds.upper_slope[:, None, :]
            act_high[:, -1, :] += bounds.upper_intercept
            function_lows.append(low_fn * bounds.lower_slope[:, None, :])
            function_highs.append(act_high)
        else:
            function_lows.append(None)
            function_highs.append(None)
    return result


def _forward_functions(
    network: Network, index: int, function_lows: list, function_highs: list, batch: int
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper linear functions of the input (B, n_inputs + 1, n_k) bounding layer `index`'s pre-activation.

    From the functions of the activations it reads: the centre line goes
    through W, the half-width through |W|. A layer that reads only the
    input gets its exact function ``[W^T; b]`` without a product.
    """
    layer = network.layers[index]
    n_in = network.n_inputs
    shape = (batch, n_in + 1, layer.n_out)
    if network.reads[index] == (0,):
        exact = np.broadcast_to(np.concatenate([layer.weight.T, layer.bias[None]]), shape)
        return exact, exact
    act_low, act_high = network.gather(index, function_lows), network.gather(index, function_highs)
    middle = ((act_low + act_high) / 2.0).reshape(-1, layer.n_in) @ layer.weight.T
    half_width = ((act_high - act_low) / 2.0).reshape(-1, layer.n_in) @ np.abs(layer.weight).T
    low_fn = (middle - half_width).reshape(shape)
    high_fn = (middle + half_width).reshape(shape)
    low_fn[:, -1, :] += layer.bias
    high_fn[:, -1, :] += layer.bias
    return low_fn, high_fn


def pack(hidden: list[LayerBounds], batch: int) -> np.ndarray:
    """Hidden-layer bounds of `batch` boxes as one array (B, 2, N_hidden): [:, 0] lower, [:, 1] upper."""
    if not hidden:
        return np.zeros((batch, 2, 0))
    low = np.concatenate([h.low for h in hidden], axis=1)
    high = np.concatenate([h.high for h in hidden], axis=1)
    return np.stack([low, high], axis=1)


@dataclass(frozen=True, eq=False)
class ObjectiveBounds:
    """Lower bounds of objectives ``C @ y - d`` over a batch of boxes, with what split choice needs.

    `lower` (B, R): sound lower bounds (already widened for rounding).
    `coefficients` (B, R, n_in): the input coefficients of the linear lower
    bound, so ``|coefficients| * width`` says how much each input's range
    costs the bound (the split score). `minimisers` (B, R, n_in): the box
    vertex where that linear lower bound is smallest (a cheap attack point).
    `unstable` (B,): number of ReLUs whose sign is not fixed on the box.
    `hidden`: the hidden-layer bounds that were used, packed (see `pack`).
    `choice` (B, R): which lower slopes gave each row's bound, a position in
    `SLOPE_CHOICES` (what a proof certificate records for a row).
    """

    lower: np.ndarray
    coefficients: np.ndarray
    minimisers: np.ndarray
    unstable: np.ndarray
    hidden: list
    choice: np.ndarray | None = None


def objective_bounds(
    network: Network,
    lowers: np.ndarray,
    uppers: np.ndarray,
    C: np.ndarray,
    d: np.ndarray | None = None,
    hidden: list[LayerBounds] | None = None,
    method: str = "backward",
    known: np.ndarray | None = None,
) -> ObjectiveBounds:
    """Lower bounds of ``C @ y - d`` (C (R, n_out), d (R,)) over each box, by back-substitution.

    `known`: hidden-layer bounds already proved for containing boxes (see
    `preactivation_bounds`).
    """
    lowers, uppers = _as_batch(lowers, uppers)
    C = np.atleast_2d(np.asarray(C, dtype=np.float64))
    d = np.zeros(C.shape[0]) if d is None else np.asarray(d, dtype=np.float64).reshape(-1)
    if hidden is None:
        hidden = preactivation_bounds(network, lowers, uppers, method, known)
    batch, n_in = lowers.shape
    count = C.shape[0]
    owner = np.repeat(np.arange(batch), count)
    rows = np.tile(C @ network.layers[-1].weight, (batch, 1))
    consts = np.tile(C @ network.layers[-1].bias - d, batch)
    top = len(network.layers) - 2
    centre = (lowers + uppers) / 2.0
    radius = (uppers - lowers) / 2.0
    magnitude = output_magnitude(network, hidden, lowers, uppers)
    slack = ROUNDING_TOLERANCE * (1.0 + magnitude @ np.abs(C).T + np.abs(d))
    lower, coefficients, choice = None, None, np.zeros((batch, count), dtype=np.int8)
    for index, slopes in enumerate(_slope_choices(hidden)):
        coef, const = _backward(network, hidden, top, rows, consts, owner, slopes)
        coef = coef.reshape(batch, count, n_in)
        bound = _concretise(coef, const.reshape(batch, count), centre, radius) - slack
        if lower is None:
            lower, coefficients = bound, coef
        else:
            better = bound > lower
            lower = np.where(better, bound, lower)
            coefficients = np.where(better[:, :, None], coef, coefficients)
            choice[better] = index
    minimisers = np.where(coefficients >= 0.0, lowers[:, None, :], uppers[:, None, :])
    unstable = sum(np.count_nonzero((layer.low < 0.0) & (layer.high > 0.0), axis=1) for layer in hidden)
    return ObjectiveBounds(lower, coefficients, minimisers, np.asarray(unstable), hidden, choice)


def output_magnitude(network: Network, hidden: list[LayerBounds], lowers: np.ndarray, uppers: np.ndarray) -> np.ndarray:
    """(B, n_out) bound on the sum of absolute terms of each output (and so on |y|), see the module docstring."""
    last = len(network.layers) - 1

    def activation(r: int) -> np.ndarray:
        if r == 0:
            return np.maximum(np.abs(lowers), np.abs(uppers))
        below = hidden[r - 1]
        return _activation_magnitude(below.magnitude, below.low, below.high)

    return _next_magnitude(network.gather(last, {r: activation(r) for r in network.reads[last]}), network.layers[last])


SLOPE_CHOICES = ("adaptive", "zero", "one", "parallel")
"""The names of the lower slopes `_slope_choices` yields, in its order: on each unstable neuron 1 where
u > -l else 0, then 0, then 1, then the upper slope u / (u - l)."""


def _slope_choices(hidden: list[LayerBounds]):
    """Lower-slope choices tried for the objective (each sound; the best bound per row is kept; `SLOPE_CHOICES`).

    The adaptive choice alone is not monotone: a sub-box can get a looser
    objective bound than its parent. Trying also the slopes 0, 1 and the
    upper slope ("parallel" lines) on unstable neurons costs little, since
    the objective has few rows.
    """
    yield None
    if not hidden:
        return
    unstable = [(h.low < 0.0) & (h.high > 0.0) for h in hidden]
    yield [np.where(mask, 0.0, h.lower_slope) for mask, h in zip(unstable, hidden)]
    yield [np.where(mask, 1.0, h.lower_slope) for mask, h in zip(unstable, hidden)]
    yield [np.where(mask, h.upper_slope, h.lower_slope) for mask, h in zip(unstable, hidden)]


def objective_lower_bounds(
    network: Network, lowers: np.ndarray, uppers: np.ndarray, C: np.ndarray, d: np.ndarray | None = None
) -> np.ndarray:
    """(B, R) sound lower bounds of ``C @ y - d`` over each box (see `objective_bounds`)."""
    return objective_bounds(network, lowers, uppers, C, d).lower


def check(network: Network, prop: Property, timeout: float) -> Result:
    """Bound the unsafe set over the whole box: ``proved`` when every disjunct is refuted, else ``unknown``.

    Incomplete (``COMPLETE = False``): it never says ``violated``, and
    ``unknown`` only means the whole-box relaxation is too loose (input
    splitting, in `_check`, goes further). `timeout` is accepted for the
    common engine interface; one pass takes milliseconds.
    """
    started = time.monotonic()
    _check_arguments(network, prop, timeout)
    if not prop.unsafe:
        return Result(PROVED, ENGINE, time.monotonic() - started, reason="the unsafe set is empty")
    C = np.concatenate([c.A for c in prop.unsafe])
    d = np.concatenate([c.b_sound for c in prop.unsafe])
    at_zero = np.concatenate([c.closes_at_zero() for c in prop.unsafe])
    lower = objective_lower_bounds(network, prop.lower, prop.upper, C, d)[0]
    refuted = (lower > 0.0) | (at_zero & (lower >= 0.0))
    rows = np.cumsum([0] + [len(c.b) for c in prop.unsafe])
    best = [float(np.max(lower[start:stop], initial=-np.inf)) for start, stop in zip(rows[:-1], rows[1:])]
    stats = {"best_row_bounds": best}
    open_disjuncts = [
        index for index, (start, stop) in enumerate(zip(rows[:-1], rows[1:])) if not np.any(refuted[start:stop])
    ]
    seconds = time.monotonic() - started
    if not open_disjuncts:
        return Result(PROVED, ENGINE, seconds, reason="bounds refute every disjunct on the whole box", stats=stats)
    first = open_disjuncts[0]
    return Result(
        UNKNOWN,
        ENGINE,
        seconds,
        reason=f"bounds cannot refute unsafe[{first}] on the whole box (best row lower bound {best[first]:.3g} <= 0)",
        stats=stats,
    )


def _check_arguments(network: Network, prop: Property, timeout: float) -> None:
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise EngineError(f"bounds: timeout={timeout!r} is not a positive number of seconds; give e.g. timeout=60")
    check_fits(network, prop, "bounds")

"""Seeded small VNN-LIB instances, in the families that once drew wrong answers, each with its exact answer.

Why: a verifier that is wrong only on rare inputs passes hand-written
tests. These families aim at the places where exact and floating-point
reasoning part ways, and the oracle (`soundness_oracle`, which reads the
written ONNX file and VNN-LIB text, not this module's plan) gives every
instance its exact answer, so a construction slip can make an instance
less interesting but never gives a wrong expectation.

- ``bump``: a random network plus a planted gadget of a few ReLUs that
  lifts one output over the threshold only within about 1e-8 of one point
  (a tent on one input, a sum of tents, an AND of tents, a min of ramps),
  or falls just short, or sits just outside the box.
- ``nearmiss``: the threshold is the exact maximum (or minimum) over the
  box, found by Z3 Optimize, moved by 10^-D to either side.
- ``tie``: the unsafe set touches the reachable set at a single float32
  point (a needle): sat with the non-strict atom, unsat with the strict one.
- ``decimal``: constants with more digits than a float64 holds, just above
  or just below a float64, in the output threshold or in an input bound.
- ``encoding``: networks written with every ONNX encoding certfsm folds
  (Gemm transB 0/1, alpha/beta, MatMul+Add, Sub/Div/Mul normalisation,
  Flatten/Reshape), with near-miss thresholds.
- ``graph``: graph-shaped networks (layers that read the input or earlier
  layers beside the one before), written with Concat, branches summed by
  Add, or Split, Slice and Concat, with near-miss thresholds.

`generate(family, seed)` is the plain entry point; `instances()` is the
hypothesis strategy over (family, seed), so a failure prints the call that
rebuilds the instance.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
from hypothesis import strategies as st

import soundness_oracle as oracle
from soundness_networks import (
    LAYER_ENCODINGS,
    NORMALISATIONS,
    WRAPPERS,
    Encoding,
    graph_to_onnx,
    join,
    layer,
    random_layers,
    to_onnx,
)

FAMILIES = ("bump", "nearmiss", "tie", "decimal", "encoding", "graph")
ZOOM = 2**13
"""Each of the two zoom layers of a gadget scales by this: the gadget's radius is 1/ZOOM**2 = 2^-26 (1.5e-8)."""


@dataclass(frozen=True)
class Instance:
    """One generated instance: `expected` is the oracle's exact answer for exactly these bytes and text."""

    family: str
    name: str
    model: onnx.ModelProto
    vnnlib: str
    expected: str

    def write(self, folder: Path) -> tuple[Path, Path]:
        onnx_path, vnnlib_path = folder / f"{self.name}.onnx", folder / f"{self.name}.vnnlib"
        onnx.save(self.model, onnx_path)
        vnnlib_path.write_text(self.vnnlib)
        return onnx_path, vnnlib_path


@functools.lru_cache(maxsize=None)
def generate(family: str, seed: int) -> Instance:
    """The instance of `family` drawn from `seed`, with its exact answer.

    Cached: the oracle's answer costs Z3 time, and the test of every
    engine asks for the same instances.
    """
    rng = np.random.default_rng([FAMILIES.index(family), seed])
    variant, model, text = _BUILDERS[family](rng)
    return Instance(family, f"{family}-{variant}-{seed}", model, text, oracle.exact_answer(model, text))


def instances(families: tuple[str, ...] = FAMILIES) -> st.SearchStrategy[Instance]:
    """Hypothesis strategy: a family and a seed, built by `generate`."""
    return st.builds(generate, st.sampled_from(families), st.integers(0, 2**32 - 1))


# --- exact decimals and VNN-LIB text --------------------------------------------------


def decimal(value: Fraction) -> str:
    """The exact decimal of a rational whose denominator has no prime factor but 2 and 5."""
    value = Fraction(value)
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
        if digits > 400:
            raise ValueError(f"{value} has no finite decimal")
    scaled = abs(value.numerator * 10**digits // value.denominator)
    text = str(scaled).rjust(digits + 1, "0")
    body = f"{text[:-digits]}.{text[-digits:]}" if digits else f"{text}.0"
    return ("-" if value < 0 else "") + body


def decimal_beside(value: Fraction, digits: int, above: bool) -> Fraction:
    """A decimal with `digits` places, strictly above (or below) `value` by at most 10^-digits."""
    unit = Fraction(1, 10**digits)
    steps = math.floor(value / unit) + 1 if above else math.ceil(value / unit) - 1
    return steps * unit


def _linear(weights: dict[int, Fraction]) -> str:
    items = sorted(weights.items())
    if len(items) == 1 and items[0][1] == 1:
        return f"Y_{items[0][0]}"
    if len(items) == 2 and sorted(w for _, w in items) == [-1, 1]:
        (plus, _), (minus, _) = sorted(items, key=lambda item: -item[1])
        return f"(- Y_{plus} Y_{minus})"
    return "(+ " + " ".join(f"(* {decimal(w)} Y_{j})" for j, w in items) + ")"


def vnnlib(lower, upper, n_outputs: int, unsafe: str, bound_text: dict | None = None) -> str:
    """The VNN-LIB text of box [lower, upper] and the unsafe formula; `bound_text` overrides a bound's numeral."""
    bound_text = bound_text or {}
    lines = [f"(declare-const X_{i} Real)" for i in range(len(lower))]
    lines += [f"(declare-const Y_{j} Real)" for j in range(n_outputs)]
    for i, (lo, hi) in enumerate(zip(lower, upper)):
        lines.append(f"(assert (>= X_{i} {bound_text.get(('lower', i), decimal(Fraction(float(lo))))}))")
        lines.append(f"(assert (<= X_{i} {bound_text.get(('upper', i), decimal(Fraction(float(hi))))}))")
    lines.append(f"(assert {unsafe})")
    return "\n".join(lines) + "\n"


def _atom(weights: dict, relation: str, constant: Fraction) -> str:
    return f"({relation} {_linear(weights)} {decimal(constant)})"


def _box(rng, n: int, grid: float = 2**-10) -> tuple[np.ndarray, np.ndarray]:
    """A box inside (-1, 1) whose bounds are multiples of `grid` (exact in float32, short decimals)."""
    lower = np.round(rng.uniform(-0.9, 0.2, n) / grid) * grid
    upper = lower + np.round(rng.uniform(0.25, 0.65, n) / grid) * grid
    return lower.astype(np.float32), upper.astype(np.float32)


def _objective(rng, n_out: int) -> dict[int, Fraction]:
    """Y_k alone, or the margin Y_k - Y_j."""
    k, j = rng.choice(n_out, 2, replace=False)
    return {int(k): Fraction(1)} if rng.random() < 0.5 else {int(k): Fraction(1), int(j): Fraction(-1)}


def _extreme(model, lower, upper, weights: dict, n_out: int, largest: bool) -> Fraction:
    sign = 1 if largest else -1
    dense = [sign * weights.get(j, 0) for j in range(n_out)]
    value, _ = oracle.exact_maximum(model, lower, upper, dense)
    return sign * value


# --- families --------------------------------------------------------------------------


def _bump(rng):
    """A random network plus a gadget lifting one output over the threshold only near one point."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    base = random_layers(rng, [n_in, int(rng.integers(4, 8)), int(rng.integers(3, 7)), n_out])
    lower, upper = _box(rng, n_in)
    shape = str(rng.choice(["tent", "tents_sum", "tents_and", "min_ramps"]))
    dims = sorted(int(i) for i in rng.choice(n_in, {"tent": 1, "tents_and": n_in}.get(shape, 2), replace=False))
    variant = str(rng.choice(["over", "short", "outside"], p=[0.5, 0.25, 0.25]))
    grid = 2**-10
    center = np.round(rng.uniform(lower + 2 * grid, upper - 2 * grid) / grid) * grid
    if variant == "outside":
        center[dims[0]] = upper[dims[0]] + 2**-23
    weights = _objective(rng, n_out)
    top = _extreme(to_onnx(base), lower, upper, weights, n_out, largest=True)
    threshold = decimal_beside(top + Fraction(rng.uniform(0.05, 0.5)), 6, above=True)
    at_center = oracle.exact_outputs(to_onnx(base), [Fraction(float(c)) for c in center])
    need = float(threshold - sum(w * at_center[j] for j, w in weights.items()))
    factor = 1 + rng.uniform(1e-3, 0.3) if variant != "short" else 1 - rng.uniform(1e-3, 0.1)
    hidden, lift = _gadget(shape, n_in, dims, center)
    height = need * factor / (2 if shape == "tents_sum" else 1)
    readout = np.zeros((n_out, hidden[-1][0].shape[0]))
    readout[next(j for j, w in weights.items() if w > 0)] = height * lift
    model = to_onnx(join(base, hidden, readout))
    return f"{shape}-{variant}", model, vnnlib(lower, upper, n_out, _atom(weights, ">=", threshold))


def _gadget(shape: str, n_in: int, dims: list[int], center) -> tuple[tuple, np.ndarray]:
    """Hidden layers and a readout row: the readout of the last layer peaks at 1 at `center` (n for tents_sum).

    Layer 1 zooms each input: u = relu(ZOOM (x - c) + 1). Layer 2 reads
    v = ZOOM (u - 1) = ZOOM^2 (x - c) through ramps; every weight and bias
    stays exact in float32 because c is a multiple of 2^-10 (or 2^-23 off one).
    """
    zoom_weight = np.zeros((len(dims), n_in))
    for row, i in enumerate(dims):
        zoom_weight[row, i] = ZOOM
    zoom = layer(zoom_weight, [1 - ZOOM * float(center[i]) for i in dims])
    d = len(dims)
    if shape in ("tent", "tents_sum", "tents_and"):
        # per input: relu(v + 1), relu(v), relu(v - 1); tent = first - 2 second + third
        ramps = layer(np.kron(np.eye(d), [[ZOOM], [ZOOM], [ZOOM]]), np.tile([1 - ZOOM, -ZOOM, -1 - ZOOM], d))
        tents = np.tile([1.0, -2.0, 1.0], d)
        if shape != "tents_and":
            return (zoom, ramps), tents
        both = layer([tents], [-(d - 1)])
        return (zoom, ramps, both), np.array([1.0])
    # min_ramps: up_i = relu(v_i + 1), down_i = relu(1 - v_i); min(up_0, down_0, up_1, down_1) through min(a, b) = a - relu(a - b)
    ramps = layer(np.kron(np.eye(2), [[ZOOM], [-ZOOM]]), np.tile([1 - ZOOM, 1 + ZOOM], 2))
    pairs = layer([[1, 0, 0, 0], [1, -1, 0, 0], [0, 0, 1, 0], [0, 0, 1, -1]], np.zeros(4))
    mins = layer([[1, -1, 0, 0], [1, -1, -1, 1]], np.zeros(2))
    return (zoom, ramps, pairs, mins), np.array([1.0, -1.0])


def _nearmiss(rng):
    """The threshold sits 10^-D beside the exact maximum (or minimum) over the box."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    layers = random_layers(rng, [n_in, int(rng.integers(3, 8)), int(rng.integers(3, 7)), n_out])
    lower, upper = _box(rng, n_in)
    model = to_onnx(layers)
    return _beside_extreme(rng, model, lower, upper, n_out, digits=int(rng.choice([6, 9, 12, 15, 18])))


def _beside_extreme(rng, model, lower, upper, n_out: int, digits: int):
    weights = _objective(rng, n_out)
    largest, reach = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
    extreme = _extreme(model, lower, upper, weights, n_out, largest)
    threshold = decimal_beside(extreme, digits, above=largest != reach)
    relation = (">" if largest else "<") + ("=" if rng.random() < 0.5 else "")
    variant = f"{'max' if largest else 'min'}-{'reach' if reach else 'miss'}-{digits}"
    return variant, model, vnnlib(lower, upper, n_out, _atom(weights, relation, threshold))


def _tie(rng):
    """The unsafe set touches the reachable outputs only at one float32 point p (a needle)."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    base = random_layers(rng, [n_in, int(rng.integers(3, 7)), int(rng.integers(3, 6)), n_out])
    lower, upper = _box(rng, n_in, grid=2**-6)
    point = np.round(rng.uniform(lower, upper) * 64) / 64
    tilts = np.round(rng.uniform(-2, 2, (3, n_in)) * 8) / 8
    # needle(x) = -sum s_i |x_i - p_i| - sum w_j relu(a_j (x - p)) <= 0, zero only at p
    hidden = layer(np.vstack([np.eye(n_in), -np.eye(n_in), tilts]), np.concatenate([-point, point, -tilts @ point]))
    needle = -np.concatenate(
        [np.tile(np.round(rng.uniform(0.25, 2, n_in) * 8) / 8, 2), np.round(rng.uniform(0, 1, 3) * 8) / 8]
    )
    k, j = (int(v) for v in rng.choice(n_out, 2, replace=False))
    readout = np.zeros((n_out, len(needle)))
    readout[k] = needle
    out_weight, out_bias = base[-1]
    strict = bool(rng.random() < 0.5)
    if rng.random() < 0.5:
        # Y_k - Y_j = needle(x): rows k and j share the base weights bit for bit
        out_weight, out_bias = out_weight.copy(), out_bias.copy()
        out_weight[k], out_bias[k] = out_weight[j], out_bias[j]
        variant, unsafe = "margin", f"(> Y_{k} Y_{j})" if strict else f"(<= Y_{j} Y_{k})"
    else:
        # Y_k = level + needle(x)
        level = np.float32(np.round(rng.uniform(-2, 2) * 64) / 64)
        out_weight, out_bias = out_weight.copy(), out_bias.copy()
        out_weight[k], out_bias[k] = 0, level
        variant, unsafe = "level", _atom({k: Fraction(1)}, ">" if strict else ">=", Fraction(float(level)))
    model = to_onnx(join(base[:-1] + (layer(out_weight, out_bias),), (hidden,), readout))
    return f"{variant}-{'strict' if strict else 'nonstrict'}", model, vnnlib(lower, upper, n_out, unsafe)


def _decimal(rng):
    """Constants with 20-40 digits, just beside a float64: in the threshold or in an input bound."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    # Y_0 = slope * x_0 + offset through relu(x_0 + 2) (x_0 >= -1); the rest random on a 1/8 grid
    slope, offset = float(rng.choice([-1.5, -0.5, 0.25, 1.0, 2.0])), float(np.round(rng.uniform(-1, 1) * 8) / 8)
    (w1, b1), (w2, b2) = random_layers(rng, [n_in, int(rng.integers(3, 7)), n_out], grid=1 / 8)
    w1, b1 = np.vstack([np.eye(1, n_in), w1]), np.concatenate([[2.0], b1])
    w2 = np.hstack([np.zeros((n_out, 1)), w2])
    w2[0], b2[0] = 0, offset - 2 * slope
    w2[0, 0] = slope
    model = to_onnx((layer(w1, b1), layer(w2, b2)))
    lower, upper = _box(rng, n_in, grid=2**-6)
    digits = int(rng.integers(20, 41))
    above = bool(rng.random() < 0.5)
    if rng.random() < 0.5:
        weights = _objective(rng, n_out)
        largest = bool(rng.random() < 0.5)
        near = Fraction(float(_extreme(model, lower, upper, weights, n_out, largest)))  # nearest float64
        threshold = near + (1 if above else -1) * Fraction(1, 10**digits)
        relation = (">" if largest else "<") + ("=" if rng.random() < 0.5 else "")
        variant = f"threshold-{'above' if above else 'below'}-{digits}"
        return variant, model, vnnlib(lower, upper, n_out, _atom(weights, relation, threshold))
    side = str(rng.choice(["lower", "upper"]))
    edge = Fraction(float(lower[0] if side == "lower" else upper[0]))
    written = edge + (1 if above else -1) * Fraction(1, 10**digits)
    rising = (side == "upper") == (slope > 0)
    relation = (">" if rising else "<") + ("" if rng.random() < 0.5 else "=")
    unsafe = _atom({0: Fraction(1)}, relation, Fraction(slope) * edge + Fraction(offset))
    variant = f"bound-{side}-{'above' if above else 'below'}-{digits}"
    return variant, model, vnnlib(lower, upper, n_out, unsafe, {(side, 0): decimal(written)})


def _encoding(rng):
    """A random network written with a random mix of ONNX encodings and normalisations, near-miss threshold."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    widths = [n_in] + [int(rng.integers(3, 7)) for _ in range(int(rng.integers(1, 3)))] + [n_out]
    layers = random_layers(rng, widths)
    normalisation = str(rng.choice(NORMALISATIONS))
    mean = np.round(rng.uniform(-50, 50, n_in), 1).astype(np.float32)
    spread = rng.choice([0.1, 0.3, 3.0, 7.0, 10.0], n_in).astype(np.float32)
    constants = {
        "none": (),
        "sub_div": (mean, spread),
        "sub_mul": (mean, (1 / spread).astype(np.float32)),
        "mul_add": ((1 / spread).astype(np.float32), (-mean / spread).astype(np.float32)),
    }[normalisation]
    encoding = Encoding(
        tuple(str(e) for e in rng.choice(LAYER_ENCODINGS, len(layers))),
        normalisation,
        constants,
        str(rng.choice(WRAPPERS)),
        tuple(float(v) for v in rng.choice([0.5, 2.0, 0.1, 3.0], 2)),
    )
    if normalisation == "none":
        lower, upper = _box(rng, n_in)
    else:
        lower = (mean - spread * np.round(rng.uniform(0.5, 2, n_in), 2)).astype(np.float32)
        upper = (mean + spread * np.round(rng.uniform(0.5, 2, n_in), 2)).astype(np.float32)
    model = to_onnx(layers, encoding)
    variant, model, text = _beside_extreme(rng, model, lower, upper, n_out, digits=int(rng.choice([6, 9, 12])))
    return f"{normalisation}-{encoding.wrapper}-{'+'.join(encoding.layers)}-{variant}", model, text


def _graph(rng):
    """A network whose layers read the input or earlier layers too, written with graph operators; near-miss threshold."""
    n_in, n_out = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    hidden = [int(rng.integers(3, 6)) for _ in range(int(rng.integers(1, 4)))]
    sizes = [n_in] + hidden
    reads = [tuple(sorted({k} | {r for r in range(k) if rng.random() < 0.5})) for k in range(len(hidden) + 1)]
    if all(len(chosen) == 1 for chosen in reads):
        reads[-1] = (0, len(hidden))
    layers = tuple(
        random_layers(rng, [sum(sizes[r] for r in chosen), width])[0] for chosen, width in zip(reads, hidden + [n_out])
    )
    lower, upper = _box(rng, n_in)
    model = graph_to_onnx(rng, layers, tuple(reads))
    variant, model, text = _beside_extreme(rng, model, lower, upper, n_out, digits=int(rng.choice([6, 9, 12])))
    return f"{'-'.join(''.join(map(str, chosen)) for chosen in reads)}-{variant}", model, text


_BUILDERS = {
    "bump": _bump,
    "nearmiss": _nearmiss,
    "tie": _tie,
    "decimal": _decimal,
    "encoding": _encoding,
    "graph": _graph,
}

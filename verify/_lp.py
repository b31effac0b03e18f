"""ReLU splitting with linear programs, closed by exact duality: boxes whose margin is thin along a surface.

Why: input splitting closes a box once the box is small enough for its
bounds to see the margin. Where the reachable outputs come within 1e-4 of
the unsafe set along a whole surface (a control-barrier check, cersyve),
the boxes needed are too many in any dimension above two, and Z3 on the
whole query stalls on the float32 rationals. Splitting on ReLU phases
instead follows the network's own pieces: once the relaxation of the few
ReLUs that matter is exact, the linear program sees the margin.

The linear program of a box and a set of split ReLUs, over the input x
(bounded by the box), every hidden activation a (bounded by [0, max(u, 0)]
from the box's sound bounds l <= z <= u) and t:

- a ReLU inactive by its bounds or split inactive: a = 0 (and z <= 0 if split);
- active by its bounds or split active: a = z (and z >= 0 if split);
- otherwise the triangle: a >= z, a <= u (z - l) / (u - l) (and a >= 0);
- each row of the unsafe conjunction: A y - b <= t, y the output layer of a;

minimise t. Every point of the box whose ReLUs follow the split phases,
with a its true activations, is feasible; if it is unsafe, t = max(row, -1)
<= 0 is feasible too. So a lower bound of the program above 0 refutes the
conjunction on that part of the box, and the two parts of a split cover it.

Soundness does not rest on the solver. HiGHS (scipy) solves in floats;
its duals y only propose a Lagrangian. Weak duality gives, for any y with
y <= 0 on the inequality rows, ``t >= y . b + min over the variable box of
(c - A^T y) . v`` for every feasible v; that bound is computed exactly, in
rationals, from the network's exact weights (float32 values read exactly,
or a fold's rationals), the box's exact bounds and the float bounds l, u
(true bounds, each an exact rational). The duals are rescaled so the
coefficient of t is exactly >= 0, which keeps the minimum finite.
A program the solver calls infeasible leaves its part open (no proof).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from certfsm import Network, rational_array

from ._bounds import pack, preactivation_bounds
from ._exact import rational_array_of
from ._property import Conjunction, Property
from ._result import PROVED, UNKNOWN, VIOLATED, Result

ENGINE = "lp"
MAX_NODES = 4000


@dataclass
class _Rows:
    """Linear constraints ``A v <= b`` (`upper`) and ``A v = b`` (`equal`): {column: coefficient} and constant,
    in floats (for the solver) or in rationals (for the bound), as `_program` builds them."""

    width: int
    upper: list = field(default_factory=list)
    equal: list = field(default_factory=list)

    def add(self, kind: str, coefficients: dict[int, Fraction], constant: Fraction) -> None:
        getattr(self, kind).append((coefficients, constant))


def _exact_layers(network: Network) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each layer's exact weights and biases as Fraction object arrays (cached on the layer)."""
    result = []
    for layer in network.layers:
        cached = getattr(layer, "_lp_exact", None)
        if cached is None:
            if layer.is_exact:
                cached = (rational_array(layer.weight), rational_array(layer.bias))
            else:
                weight = rational_array_of(layer.exact_weight(), layer.weight.shape)
                cached = (weight, rational_array_of(layer.exact_bias(), layer.bias.shape))
            object.__setattr__(layer, "_lp_exact", cached)
        result.append(cached)
    return result


def _columns(network: Network) -> list[np.ndarray]:
    """The LP variable index of every value of every activation (0 the input; then hidden layers; t last)."""
    columns, start = [], 0
    for size in network.activation_sizes:
        columns.append(np.arange(start, start + size))
        start += size
    return columns


def _program(
    network: Network, prop_box, low, high, splits: dict[int, int], conjunction: Conjunction, exact: bool = True
):
    """The rows, variable bounds and objective of one node's program (see the module docstring).

    `exact`: in rationals, what the bound is computed on; else in floats,
    the same program for the solver alone (building it in rationals for
    every node cost more than solving it).
    """
    number = Fraction if exact else float
    layers = _exact_layers(network) if exact else [(layer.weight, layer.bias) for layer in network.layers]
    columns = _columns(network)
    width = columns[-1][-1] + 2 if len(columns) > 1 else columns[0][-1] + 2
    t = width - 1
    rows = _Rows(width)
    bounds: list = [(number(lo), number(hi)) for lo, hi in zip(*prop_box)]
    zero, one = number(0), number(1)
    neuron = 0
    for index in range(len(network.layers) - 1):
        weight, bias = layers[index]
        reads = np.concatenate([columns[r] for r in network.reads[index]])
        for k in range(weight.shape[0]):
            z = {int(c): w for c, w in zip(reads, weight[k]) if w}
            a = int(columns[index + 1][k])
            lo, hi = number(float(low[neuron])), number(float(high[neuron]))
            phase = splits.get(neuron, 1 if lo >= 0 else -1 if hi <= 0 else 0)
            if phase < 0:
                bounds.append((zero, zero))
                if neuron in splits:
                    rows.add("upper", z, -bias[k])  # z <= 0
            elif phase > 0:
                bounds.append((zero, max(hi, zero)))
                rows.add("equal", {**{c: -w for c, w in z.items()}, a: one}, bias[k])  # a - z = 0
                if neuron in splits:
                    rows.add("upper", {c: -w for c, w in z.items()}, bias[k])  # -z <= 0
            else:
                bounds.append((zero, hi))
                rows.add("upper", {**z, a: -one}, -bias[k])  # z - a <= 0
                slope = hi / (hi - lo)
                line = {c: -slope * w for c, w in z.items()}
                line[a] = one
                rows.add("upper", line, slope * bias[k] - slope * lo)  # a - s (z - l) <= 0
            neuron += 1
    weight, bias = layers[-1]
    reads = np.concatenate([columns[r] for r in network.reads[-1]])
    for row, rhs in zip(conjunction.A, conjunction.exact_b):
        coefficients = np.array([number(float(v)) for v in row], dtype=object if exact else float)
        through = coefficients @ weight
        line = {int(c): w for c, w in zip(reads, through) if w}
        line[t] = -one
        rows.add("upper", line, number(rhs) - coefficients @ bias)  # A y - b - t <= 0
    bounds.append((number(-1), None))
    return rows, bounds, t


def _dense(entries, width: int) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.zeros((len(entries), width))
    for i, (coefficients, _) in enumerate(entries):
        for c, w in coefficients.items():
            matrix[i, c] = float(w)
    return matrix, np.array([float(constant) for _, constant in entries])


def _solve(rows: _Rows, bounds, t: int):
    """HiGHS on the float program: (status, v, upper duals, equality duals)."""
    from scipy.optimize import linprog

    cost = np.zeros(rows.width)
    cost[t] = 1.0
    a_ub, b_ub = _dense(rows.upper, rows.width)
    a_eq, b_eq = _dense(rows.equal, rows.width) if rows.equal else (None, None)
    float_bounds = [(float(lo), None if hi is None else float(hi)) for lo, hi in bounds]
    answer = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=float_bounds, method="highs")
    if answer.status != 0:
        return answer.status, None, None, None
    equal = answer.eqlin.marginals if rows.equal else np.zeros(0)
    return 0, answer.x, answer.ineqlin.marginals, equal


def _exact_bound(rows: _Rows, bounds, t: int, upper_duals: np.ndarray, equal_duals: np.ndarray) -> Fraction:
    """Weak duality in rationals: a lower bound of t over the program, from any duals (see the module docstring)."""
    finite = [float(y) if math.isfinite(float(y)) else 0.0 for y in np.concatenate([upper_duals, equal_duals])]
    duals = [Fraction(min(y, 0.0)) for y in finite[: len(rows.upper)]] + [
        Fraction(y) for y in finite[len(rows.upper) :]
    ]
    entries = rows.upper + rows.equal
    scale = -sum(y for y, (coefficients, _) in zip(duals, entries) if coefficients.get(t))
    y = [v / scale for v in duals] if scale > 1 else duals
    reduced = [Fraction(0)] * rows.width
    reduced[t] = Fraction(1)
    total = Fraction(0)
    for weight, (coefficients, constant) in zip(y, entries):
        if not weight:
            continue
        total += weight * constant
        for c, w in coefficients.items():
            reduced[c] -= weight * w
    for r, (lo, hi) in zip(reduced, bounds):
        if r > 0:
            total += r * lo
        elif r < 0:
            if hi is None:  # these duals give no finite bound
                return Fraction(-(10**9))
            total += r * hi
    return total


def _proved_empty(rows: _Rows, bounds) -> bool:
    """True when the program has no feasible point, shown exactly: min s with every row relaxed by s is above 0.

    The relaxed program is always feasible (s large), so HiGHS gives its
    duals; weak duality in rationals then bounds s from below, as for t.
    """
    s = rows.width
    relaxed = _Rows(rows.width + 1)
    for coefficients, constant in rows.upper:
        if coefficients.get(s - 1):  # a row of the unsafe set (it reads t): emptiness needs the region alone
            continue
        relaxed.add("upper", {**coefficients, s: Fraction(-1)}, constant)
    for coefficients, constant in rows.equal:
        relaxed.add("upper", {**coefficients, s: Fraction(-1)}, constant)
        relaxed.add("upper", {**{c: -w for c, w in coefficients.items()}, s: Fraction(-1)}, -constant)
    relaxed_bounds = list(bounds) + [(Fraction(-1), None)]
    status, _, upper_duals, equal_duals = _solve(relaxed, relaxed_bounds, s)
    return status == 0 and _exact_bound(relaxed, relaxed_bounds, s, upper_duals, equal_duals) > 0


@dataclass
class _Node:
    splits: dict[int, int]


def check_box(network: Network, prop: Property, seconds: float, max_nodes: int = MAX_NODES) -> Result:
    """Refute every disjunct of `prop` on its box by ReLU splitting and exact LP bounds; else unknown or violated.

    ``violated`` only with a counterexample that `validate_counterexample`
    accepts (exactly, in float64 and in onnxruntime).
    """
    from ._validate import validate_counterexample

    started = time.monotonic()
    deadline = started + seconds
    lower, upper = prop.lower[None], prop.upper[None]
    box = (prop.exact_lower, prop.exact_upper)
    nodes = 0

    def answer(verdict: str, reason: str = "", x: np.ndarray | None = None) -> Result:
        seconds = time.monotonic() - started
        return Result(verdict, ENGINE, seconds, reason=reason, counterexample=x, stats={"lp_nodes": nodes})

    for index, conjunction in enumerate(prop.unsafe):
        stack = [_Node({})]
        while stack:
            if time.monotonic() > deadline or nodes >= max_nodes:
                return answer(UNKNOWN, f"ReLU splitting left unsafe[{index}] open after {nodes} linear programs")
            node = stack.pop()
            nodes += 1
            known = _split_bounds(network, lower, upper, node.splits)
            low, high = known[0, 0], known[0, 1]
            if np.any(low > high):  # sound bounds meet no point with these phases: nothing to refute there
                continue
            program = (network, box, low, high, node.splits, conjunction)
            status, solution, upper_duals, equal_duals = _solve(*_program(*program, exact=False))
            if status == 2 and _proved_empty(*_program(*program)[:2]):
                continue
            if status != 0:
                return answer(
                    UNKNOWN,
                    f"the linear program of unsafe[{index}] with {len(node.splits)} split ReLUs "
                    f"could not be solved (HiGHS status {status})",
                )
            if solution[-1] > 0.0 and _exact_bound(*_program(*program), upper_duals, equal_duals) > 0:
                continue  # only where the floats say the piece closes are its rationals worth building
            x = np.clip(solution[: network.n_inputs], prop.lower, prop.upper)
            if prop.unsafe_slack(network.evaluate(x[None]))[0] >= 0.0 and validate_counterexample(network, prop, x).ok:
                return answer(VIOLATED, "a linear program's point is a validated counterexample", x)
            choice = _branch(network, solution, low, high, node.splits)
            if choice is None:
                return answer(UNKNOWN, f"every ReLU of unsafe[{index}]'s program is split and its bound is not above 0")
            stack += [_Node({**node.splits, choice: -1}), _Node({**node.splits, choice: 1})]
    return answer(PROVED, f"exact LP bounds refute every disjunct after ReLU splitting ({nodes} linear programs)")


def _split_bounds(network: Network, lower, upper, splits: dict[int, int]) -> np.ndarray:
    """Sound pre-activation bounds on the part of the box where the split ReLUs have their phase."""
    total = sum(network.hidden_sizes)
    known = np.empty((1, 2, total))
    known[:, 0], known[:, 1] = -np.inf, np.inf
    for neuron, phase in splits.items():
        known[0, 0 if phase > 0 else 1, neuron] = 0.0
    return pack(preactivation_bounds(network, lower, upper, known=known), 1)


def _branch(network: Network, solution: np.ndarray, low, high, splits: dict[int, int]) -> int | None:
    """The unstable, unsplit ReLU whose triangle the LP's point uses most (its a above relu(z))."""
    columns = _columns(network)
    activations = np.concatenate([solution[c] for c in columns[1:]]) if len(columns) > 1 else np.zeros(0)
    pre = []
    for index, layer in enumerate(network.layers[:-1]):
        gathered = np.concatenate([solution[columns[r]] for r in network.reads[index]])
        pre.append(layer.weight @ gathered + layer.bias)
    z = np.concatenate(pre) if pre else np.zeros(0)
    gap = activations - np.maximum(z, 0.0)
    unstable = (low < 0.0) & (high > 0.0)
    if splits:
        unstable[list(splits)] = False
    if not np.any(unstable):
        return None
    score = np.where(unstable, gap + 1e-9 * (high - low), -np.inf)
    return int(np.argmax(score))

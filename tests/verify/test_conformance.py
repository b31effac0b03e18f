"""The conformance suite every engine passes.

One shared list of tiny hand-built networks and properties whose answers
are obvious on paper, run against every engine through the same
``check(network, prop, timeout) -> Result`` call (the orchestrator through
a small adapter). An engine declares ``COMPLETE``: a complete engine must
give exactly the expected verdict; an incomplete one (bound propagation)
may also say ``unknown`` but never the opposite verdict. A ``violated``
verdict must carry a counterexample inside the box that re-evaluates to
an unsafe output. An engine whose module or solver package is missing is
skipped with the reason, never passed.

Batched box bounding (`verify.prove_boxes`, the proof of distillation's
grid cells) runs here as an incomplete engine too: the property's box cut
into halves along every input, ``proved`` only when every part is.

Then property-based checks on random small networks whose weights are
small dyadic rationals (exact in float32): Marabou never says ``proved``
where dense sampling finds an unsafe point, Marabou and Z3 never
contradict each other, `prove_boxes` never proves a box on which Z3
finds an unsafe point, and never a box that holds a planted unsafe point.
"""

from __future__ import annotations

import importlib.util
import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import AffineLayer, Network
from certfsm.verify import Conjunction, Property, chosen_conjunction, exact_outputs, prove_boxes
from certfsm.verify._engines import ENGINE_REGISTRY
from certfsm.verify._result import Result
from certfsm.verify._engines import solver_package

TIMEOUT = 20.0


def _direct(module, network: Network, prop: Property, timeout: float) -> Result:
    return module.check(network, prop, timeout)


def _registered(name: str) -> Callable[..., Result]:
    """`certfsm.verify.check` with the registered engine `name`."""

    def call(module, network: Network, prop: Property, timeout: float) -> Result:
        return module.check(network, prop, engine=name, timeout=timeout)

    call.engine = name
    return call


def _halves(prop: Property) -> tuple[np.ndarray, np.ndarray]:
    """The property's box cut in two along every input: 2**n parts that cover it."""
    mid = (prop.lower + prop.upper) / 2.0
    sides = [((low, centre), (centre, high)) for low, centre, high in zip(prop.lower, mid, prop.upper)]
    parts = list(itertools.product(*sides))
    return (
        np.array([[side[0] for side in part] for part in parts]),
        np.array([[side[1] for side in part] for part in parts]),
    )


def _many_boxes(module, network: Network, prop: Property, timeout: float) -> Result:
    """`prove_boxes` on the box's halves as an engine: proved only when every half is, else unknown."""
    lower, upper = _halves(prop)
    found = module.prove_boxes(network, prop, lower, upper)
    if found.proved.all():
        return Result("proved", "prove_boxes", 0.0)
    return Result("unknown", "prove_boxes", 0.0, reason=f"{int((~found.proved).sum())} parts not closed by bounds")


@dataclass(frozen=True)
class Engine:
    """An engine under test: its module, the solver packages it needs, how to call it."""

    module_name: str
    packages: tuple[str, ...]
    call: Callable[..., Result]
    incomplete: bool = False

    @property
    def name(self) -> str:
        if self.call is _many_boxes:
            return "prove_boxes"
        if hasattr(self.call, "engine"):
            return f"check-{self.call.engine}"
        return self.module_name.rsplit(".", 1)[-1].lstrip("_")

    def is_complete(self, module) -> bool:
        return bool(getattr(module, "COMPLETE", False)) and not self.incomplete

    def load(self):
        for package in self.packages:
            if importlib.util.find_spec(package) is None:
                pytest.skip(f"{self.module_name} needs the {package!r} package, which is not installed")
        module = importlib.import_module(self.module_name)
        if not hasattr(module, "check"):
            pytest.fail(f"engine module {self.module_name} has no check(network, prop, timeout) function")
        return module


ENGINES = (
    Engine("certfsm.verify._marabou", ("maraboupy",), _direct),
    Engine("certfsm.verify._z3", ("z3",), _direct),
    Engine("certfsm.verify._bounds", (), _direct),
    Engine("certfsm.verify._slopes", (), _direct),
    *(
        Engine(
            "certfsm.verify._check",
            tuple(solver_package(s) for s in registered.solvers),
            _registered(name),
            incomplete=not registered.complete,
        )
        for name, registered in ENGINE_REGISTRY.items()
    ),
    Engine("certfsm.verify", (), _many_boxes, incomplete=True),
)
"""The solver back-ends, then every engine of the registry through `check` (one that registers joins here)."""


def _layer(weight, bias, name: str) -> AffineLayer:
    return AffineLayer(np.array(weight, dtype=float), np.array(bias, dtype=float), name)


def _net(*layers) -> Network:
    return Network(tuple(_layer(w, b, f"layer{k}") for k, (w, b) in enumerate(layers)))


# y = relu(x) - relu(-x) = x
IDENTITY = _net(([[1], [-1]], [0, 0]), ([[1, -1]], [0]))
# y0 = |x0 - x1|, y1 = x0 - x1
ABS_DIFF = _net(([[1, -1], [-1, 1]], [0, 0]), ([[1, 1], [1, -1]], [0, 0]))
# y = relu(x0 + x1) - 2 relu(x0 + x1 - 1): 0 at (0,0) and (1,1), 1 on the line x0 + x1 = 1
XOR = _net(([[1, 1], [1, 1]], [0, -1]), ([[1, -2]], [0]))
# y0 = relu(x), y1 = 1 - relu(x): equal only at x = 0.5
TIE = _net(([[1]], [0]), ([[1], [-1]], [0, 1]))
# y = |x0| + |x1|: zero only at the origin
L1 = _net(([[1, 0], [-1, 0], [0, 1], [0, -1]], [0, 0, 0, 0]), ([[1, 1, 1, 1]], [0]))
# scores (x, 1 - x, 0.25), argmax: token 2 never wins, token 0 wins for x >= 0.5
THREE_TOKENS = _net(([[1]], [0]), ([[1], [-1], [0]], [0, 1, 0.25]))
# y = relu(relu(x) - 0.5) on [0, 1]: at most 0.5, reached at x = 1
DEEP = _net(([[1]], [0]), ([[1]], [-0.5]), ([[1]], [0]))
# at most about 3.744 on [0, 1]^2, but whole-box bounds only show it is below 4.2 (halving the box closes 3.875)
BUMPY = _net(([[1.5, -1], [-2, -1], [-0.5, 1.5], [0, -2]], [-0.5, 0.5, 1, 0.5]), ([[2, -1.5, 1.5, -2]], [0]))


# graphs: y = x0 - relu(x0) = min(x0, 0), the output reads the input beside the hidden layer
SKIP_MIN = Network(
    (_layer([[1, 0]], [0], "relu x0"), AffineLayer(np.array([[1.0, 0.0, -1.0]]), np.zeros(1), "skip", reads=(0, 1)))
)
# y = |x0 - x1| + relu(x1 - 0.5) - x1: the second hidden layer reads the input too, the output both layers
MERGED = Network(
    (
        _layer([[1, -1], [-1, 1]], [0, 0], "abs parts"),
        AffineLayer(np.array([[0.0, 1.0, 0.0, 0.0]]), np.array([-0.5]), "x1 - 0.5", reads=(0, 1)),
        AffineLayer(np.array([[0.0, -1.0, 1.0, 1.0, 1.0]]), np.zeros(1), "sum", reads=(0, 1, 2)),
    )
)


def _ge(value: float, index: int = 0, n: int = 1) -> Conjunction:
    row = np.zeros(n)
    row[index] = -1.0
    return Conjunction([row], [-value], (f"y{index} >= {value}",))


def _le(value: float, index: int = 0, n: int = 1) -> Conjunction:
    row = np.zeros(n)
    row[index] = 1.0
    return Conjunction([row], [value], (f"y{index} <= {value}",))


def _prop(lower, upper, *unsafe: Conjunction) -> Property:
    return Property("conformance", np.atleast_1d(lower), np.atleast_1d(upper), unsafe)


@dataclass(frozen=True)
class Case:
    name: str
    network: Network
    prop: Property
    expected: str


CASES = (
    Case("identity-out-of-range", IDENTITY, _prop(-1, 1, _ge(1.5)), "proved"),
    Case("identity-in-range", IDENTITY, _prop(-1, 1, _ge(0.5)), "violated"),
    Case("identity-box-corner-tie", IDENTITY, _prop(-1, 1, _ge(1.0)), "violated"),
    Case("identity-empty-unsafe-set", IDENTITY, _prop(-1, 1), "proved"),
    Case("identity-point-box-hit", IDENTITY, _prop(0.25, 0.25, _ge(0.25)), "violated"),
    Case("identity-point-box-miss", IDENTITY, _prop(0.25, 0.25, _ge(0.3)), "proved"),
    Case(
        "abs-diff-disjunction-unreachable", ABS_DIFF, _prop([0, 0], [1, 1], _ge(1.5, 0, 2), _le(-1.5, 1, 2)), "proved"
    ),
    Case(
        "abs-diff-disjunction-second-branch",
        ABS_DIFF,
        _prop([0, 0], [1, 1], _ge(1.5, 0, 2), _le(-0.5, 1, 2)),
        "violated",
    ),
    Case(
        "abs-diff-conjunction", ABS_DIFF, _prop([0, 0], [1, 1], Conjunction([[-1, 0], [0, 1]], [-0.75, 0])), "violated"
    ),
    Case("xor-above-one", XOR, _prop([0, 0], [1, 1], _ge(1.25)), "proved"),
    Case("xor-one-on-a-segment", XOR, _prop([0, 0], [1, 1], _ge(1.0)), "violated"),
    Case("xor-never-negative", XOR, _prop([0, 0], [1, 1], _le(-0.25)), "proved"),
    Case("xor-point-box", XOR, _prop([0.25, 0.75], [0.25, 0.75], _ge(1.0)), "violated"),
    Case("tie-at-one-point", TIE, _prop(0, 1, Conjunction([[1, -1], [-1, 1]], [0, 0])), "violated"),
    Case("tie-missed-box", TIE, _prop(0, 0.375, Conjunction([[1, -1], [-1, 1]], [0, 0])), "proved"),
    Case("l1-zero-at-origin-only", L1, _prop([-1, -1], [1, 1], _le(0.0)), "violated"),
    Case("l1-origin-outside-box", L1, _prop([0.25, -1], [1, 1], _le(0.0)), "proved"),
    Case("argmax-token-never-chosen", THREE_TOKENS, _prop(0, 1, chosen_conjunction(2, 3, "argmax")), "proved"),
    Case("argmax-token-chosen-with-ties", THREE_TOKENS, _prop(0, 1, chosen_conjunction(0, 3, "argmax")), "violated"),
    Case("deep-maximum-reached", DEEP, _prop(0, 1, _ge(0.5)), "violated"),
    Case("deep-above-maximum", DEEP, _prop(0, 1, _ge(0.625)), "proved"),
    Case("bumpy-below-its-maximum-after-splitting", BUMPY, _prop([0, 0], [1, 1], _ge(3.875)), "proved"),
    Case("bumpy-reaches", BUMPY, _prop([0, 0], [1, 1], _ge(3.5)), "violated"),
    Case("graph-skip-never-positive", SKIP_MIN, _prop([-1, -1], [1, 1], _ge(0.125)), "proved"),
    Case("graph-skip-zero-reached", SKIP_MIN, _prop([-1, -1], [1, 1], _ge(0.0)), "violated"),
    Case("graph-skip-minimum-at-corner", SKIP_MIN, _prop([-1, -1], [1, 1], _le(-1.0)), "violated"),
    # MERGED on [0, 1]^2: |x0 - x1| - x1 + relu(x1 - 0.5); at most 1 (x0 = 1, x1 = 0), at least -0.5 (x0 = x1 = 0.5)
    Case("graph-merged-above-maximum", MERGED, _prop([0, 0], [1, 1], _ge(1.125)), "proved"),
    Case("graph-merged-maximum-reached", MERGED, _prop([0, 0], [1, 1], _ge(1.0)), "violated"),
    Case("graph-merged-below-minimum", MERGED, _prop([0, 0], [1, 1], _le(-0.625)), "proved"),
)


def assert_consistent(result: Result, expected: str, *, complete: bool, network: Network, prop: Property) -> None:
    """A complete engine gives `expected`; an incomplete one `expected` or unknown; never the opposite.

    A violated verdict must also carry a real counterexample: inside the
    box and re-evaluating (float64) to an unsafe output.
    """
    assert expected in ("proved", "violated")
    allowed = {expected} if complete else {expected, "unknown"}
    assert result.verdict in allowed, (
        f"{result.engine} said {result.verdict} ({result.reason}); expected {expected}"
        + ("" if complete else " or unknown")
    )
    if result.verdict == "violated":
        x = np.asarray(result.counterexample, dtype=np.float64)
        assert prop.contains_input(x), f"counterexample {x} is outside the box"
        assert prop.unsafe_slack(network.evaluate(x)) >= 0.0, f"counterexample {x} does not re-evaluate"


@pytest.fixture(params=ENGINES, ids=lambda engine: engine.name)
def engine(request) -> tuple[Engine, object]:
    spec = request.param
    module = spec.load()
    if spec.module_name.endswith("_marabou") and not module.is_available():
        pytest.skip("maraboupy is installed but does not import")
    return spec, module


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_engine_gives_the_known_answer(engine, case):
    spec, module = engine
    result = spec.call(module, case.network, case.prop, TIMEOUT)
    assert isinstance(result, Result)
    assert_consistent(
        result,
        case.expected,
        complete=spec.is_complete(module),
        network=case.network,
        prop=case.prop,
    )


def test_the_cases_mean_what_they_say():
    """The oracle itself: dense sampling never finds an unsafe point in a `proved` case."""
    for case in CASES:
        samples = _dense_samples(case.prop, np.random.default_rng(0))
        unsafe = case.prop.unsafe_slack(case.network.evaluate(samples)) >= 0.0
        if case.expected == "proved":
            assert not np.any(unsafe), case.name


def test_assert_consistent_rejects_the_opposite_verdict():
    case = CASES[0]
    fake = Result("violated", "fake", 0.0, counterexample=np.array([0.0]))
    with pytest.raises(AssertionError):
        assert_consistent(fake, "proved", complete=False, network=case.network, prop=case.prop)
    with pytest.raises(AssertionError):
        assert_consistent(Result("unknown", "fake", 0.0), "proved", complete=True, network=case.network, prop=case.prop)
    with pytest.raises(AssertionError, match="does not re-evaluate"):
        assert_consistent(fake, "violated", complete=True, network=case.network, prop=case.prop)


def _dense_samples(prop: Property, rng: np.random.Generator, count: int = 4096) -> np.ndarray:
    corners = np.array(list(itertools.product(*zip(prop.lower, prop.upper))))
    uniform = prop.lower + rng.random((count, prop.n_inputs)) * (prop.upper - prop.lower)
    return np.vstack([corners, uniform, (prop.lower + prop.upper) / 2])


def _dyadic(low: int, high: int) -> st.SearchStrategy[float]:
    """Small integers over 1, 2 or 4: exact in float32, so every engine sees the same numbers."""
    return st.builds(lambda n, k: n / 2**k, st.integers(low, high), st.integers(0, 2))


@st.composite
def random_problems(draw) -> tuple[Network, Property]:
    n_inputs = draw(st.integers(2, 3))
    sizes = [n_inputs] + draw(st.lists(st.integers(2, 6), min_size=1, max_size=2)) + [draw(st.integers(1, 3))]
    is_graph = draw(st.booleans())
    layers = []
    for index, n_out in enumerate(sizes[1:]):
        reads = (index,)
        if is_graph:  # a graph: each layer may also read the input and any earlier layer (skips, merged branches)
            reads = tuple(r for r in range(index) if draw(st.booleans())) + (index,)
        n_in = sum(sizes[r] for r in reads)
        weight = draw(st.lists(_dyadic(-4, 4), min_size=n_in * n_out, max_size=n_in * n_out))
        bias = draw(st.lists(_dyadic(-4, 4), min_size=n_out, max_size=n_out))
        layers.append(AffineLayer(np.reshape(weight, (n_out, n_in)), bias, f"layer{index}", reads=reads))
    network = Network(tuple(layers))
    lower = np.array(draw(st.lists(st.integers(-8, 8), min_size=n_inputs, max_size=n_inputs))) / 4
    width = np.array(draw(st.lists(st.integers(0, 8), min_size=n_inputs, max_size=n_inputs))) / 4
    n_out = sizes[-1]
    unsafe = []
    for _ in range(draw(st.integers(1, 2))):
        rows = draw(st.integers(1, 2))
        A = np.reshape(draw(st.lists(st.integers(-2, 2), min_size=rows * n_out, max_size=rows * n_out)), (rows, n_out))
        b = np.array(draw(st.lists(st.integers(-16, 16), min_size=rows, max_size=rows))) / 4
        unsafe.append(Conjunction(A.astype(float), b))
    return network, Property("random", lower, lower + width, tuple(unsafe))


def _marabou():
    if importlib.util.find_spec("maraboupy") is None:
        pytest.skip("maraboupy is not installed")
    module = importlib.import_module("certfsm.verify._marabou")
    if not module.is_available():
        pytest.skip("maraboupy does not import")
    return module


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=random_problems())
def test_marabou_never_contradicts_dense_sampling(problem):
    marabou = _marabou()
    network, prop = problem
    samples = _dense_samples(prop, np.random.default_rng(0))
    sampled_unsafe = bool(np.any(prop.unsafe_slack(network.evaluate(samples)) >= 0.0))
    result = marabou.check(network, prop, TIMEOUT)
    if sampled_unsafe:
        assert result.verdict != "proved", f"Marabou proved a property that sampling violates: {result.reason}"
    if result.verdict == "violated":
        assert_consistent(result, "violated", complete=True, network=network, prop=prop)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=random_problems())
def test_marabou_and_z3_never_contradict(problem):
    marabou = _marabou()
    z3_engine = next(engine for engine in ENGINES if engine.module_name.endswith("_z3")).load()
    network, prop = problem
    verdicts = {marabou.check(network, prop, TIMEOUT).verdict, z3_engine.check(network, prop, TIMEOUT).verdict}
    assert verdicts != {"proved", "violated"}, f"Marabou and Z3 disagree on {prop}"


@st.composite
def boxes_inside(draw, prop: Property, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` boxes inside the property's box, corners on a grid of eighths of it (some of them points)."""
    steps = st.lists(st.integers(0, 8), min_size=prop.n_inputs, max_size=prop.n_inputs)
    lower, upper = [], []
    for _ in range(count):
        ends = np.sort(np.array([draw(steps), draw(steps)]), axis=0) / 8.0
        lower.append(prop.lower + ends[0] * (prop.upper - prop.lower))
        upper.append(prop.lower + ends[1] * (prop.upper - prop.lower))
    return np.array(lower), np.array(upper)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), problem=random_problems())
def test_prove_boxes_never_contradicts_an_exact_check(data, problem):
    """Every box `prove_boxes` proves is free of unsafe points: dense samples and Z3 (exact) find none there."""
    z3_engine = next(engine for engine in ENGINES if engine.module_name.endswith("_z3")).load()
    network, prop = problem
    lower, upper = data.draw(boxes_inside(prop, 6))
    found = prove_boxes(network, prop, lower, upper, max_depth=6)
    assert found.proved.shape == (6,) and found.bounded >= 6
    for low, high in zip(lower[found.proved], upper[found.proved]):
        part = prop.restricted(low, high)
        samples = _dense_samples(part, np.random.default_rng(0), count=512)
        assert not np.any(part.unsafe_slack(network.evaluate(samples)) >= 0.0), f"proved {low}..{high}, sampled unsafe"
        exact = z3_engine.check(network, part, TIMEOUT)
        assert exact.verdict != "violated", f"prove_boxes proved {low}..{high}; Z3 found {exact.counterexample}"


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), problem=random_problems())
def test_prove_boxes_never_proves_a_box_with_a_planted_unsafe_point(data, problem):
    """Plant an unsafe point x (its exact outputs meet a random row with equality, the tightest case) and give
    boxes that hold x, down to the point box [x, x]: none of them may be proved."""
    network, prop = problem
    x = prop.lower + np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=prop.n_inputs, max_size=prop.n_inputs))
    ) / 4.0 * (prop.upper - prop.lower)
    row = np.array(
        data.draw(st.lists(st.integers(-2, 2), min_size=network.n_outputs, max_size=network.n_outputs)), dtype=float
    )
    at_x = sum((float(a) * y for a, y in zip(row, exact_outputs(network, x)) if a), 0)
    planted = Property(
        "planted", prop.lower, prop.upper, (Conjunction(row[None], [float(at_x)], ("planted",), exact_b=(at_x,)),)
    )
    assert planted.is_unsafe_exactly(exact_outputs(network, x))
    reach = (
        np.array(
            data.draw(st.lists(st.integers(0, 4), min_size=2 * prop.n_inputs, max_size=2 * prop.n_inputs))
        ).reshape(2, -1)
        / 4.0
    )
    lower = np.array([x, np.maximum(prop.lower, x - reach[0]), prop.lower])
    upper = np.array([x, np.minimum(prop.upper, x + reach[1]), prop.upper])
    found = prove_boxes(network, planted, lower, upper, max_depth=6)
    assert not found.proved.any(), f"proved a box holding the planted unsafe point {x}"


def test_prove_boxes_splits_what_the_whole_box_cannot_close_and_counts_the_work():
    """BUMPY below 3.875 is not closed by whole-box bounds on [0, 1]^2 but is after halvings; with no halvings
    allowed it stays open. The work counts say which happened."""
    prop = _prop([0, 0], [1, 1], _ge(3.875))
    whole = prove_boxes(BUMPY, prop, prop.lower, prop.upper, max_depth=0)
    assert not whole.proved.any() and whole.bounded == 1 and whole.deepest == 0
    split = prove_boxes(BUMPY, prop, prop.lower, prop.upper, max_depth=8)
    assert split.proved.all() and split.deepest >= 1 and split.bounded > 1


def test_prove_boxes_keeps_overlapping_boxes_apart():
    """Boxes may overlap: each sub-box is counted for the box it was cut from, never for a neighbour."""
    prop = _prop([0, 0], [1, 1], _ge(1.0))
    lower = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    upper = np.array([[0.25, 0.25], [1.0, 1.0], [0.5, 0.25]])
    found = prove_boxes(XOR, prop, lower, upper, max_depth=8)
    assert found.proved.tolist() == [True, False, True]


@pytest.mark.parametrize(
    "lower, upper, message",
    [
        ([[0.0, 0.0]], [[2.0, 1.0]], r"^prove_boxes: a box leaves the box of property 'conformance'; widen"),
        ([[0.5, 0.0]], [[0.25, 1.0]], r"^prove_boxes: every box must be finite with lower <= upper \(property"),
        ([[0.0, np.nan]], [[1.0, 1.0]], r"^prove_boxes: every box must be finite"),
        (
            [[0.0]],
            [[1.0]],
            r"^prove_boxes: lower \(1, 1\) and upper \(1, 1\) must both be \(boxes, 2\), one row per box",
        ),
    ],
)
def test_prove_boxes_refuses_boxes_that_do_not_fit(lower, upper, message):
    with pytest.raises(ValueError, match=message):
        prove_boxes(XOR, _prop([0, 0], [1, 1], _ge(1.25)), lower, upper)

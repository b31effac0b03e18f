"""The Z3 back-end on its own: verdicts, counterexamples, spurious models, timeouts, errors.

Networks are small enough that the answers are obvious by hand, and
counterexamples are re-evaluated with `Network.evaluate`, not compared
with fixed points. The engine solves the text of `smtlib_script`; the
stock `z3` command on the written report file must give the same answer.
Hypothesis draws random tiny networks whose weights and sample points are
short dyadic rationals, so float64 sampling is exact and is a true oracle:
where sampling finds an unsafe point, Z3 must not say ``proved``.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import EngineError
from certfsm import AffineLayer, Network
from certfsm.verify import _z3
from certfsm.verify._property import Conjunction, Property, chosen_conjunction
from one_input_queries import assert_real_counterexample as _assert_real_counterexample, at_least, at_most, box

from certfsm.verify._smtlib import write_smtlib

if not _z3.is_available():
    pytest.skip("z3 is not importable; pip install z3-solver", allow_module_level=True)

TIMEOUT = 30.0

# |x| = relu(x) + relu(-x).
ABS = Network((AffineLayer([[1.0], [-1.0]], [0.0, 0.0], "hidden"), AffineLayer([[1.0, 1.0]], [0.0], "output")))


def assert_real_counterexample(network: Network, prop: Property, result) -> None:
    _assert_real_counterexample(network, prop, result)
    assert result.engine == "z3"


def test_proves_an_impossible_output():
    result = _z3.check(ABS, box(at_most(-0.25)), TIMEOUT)
    assert (result.verdict, result.engine, result.reason) == ("proved", "z3", "z3: UNSAT")
    assert result.counterexample is None and result.stats["relus"] == 2


def test_finds_a_reachable_output():
    prop = box(at_least(0.5))
    assert_real_counterexample(ABS, prop, _z3.check(ABS, prop, TIMEOUT))


def test_boundary_counterexample_at_a_tie_is_real():
    """|x| >= 1 only at the box corners x = +-1: the model sits exactly on the boundary."""
    prop = box(at_least(1.0))
    assert_real_counterexample(ABS, prop, _z3.check(ABS, prop, TIMEOUT))
    assert _z3.check(ABS, box(at_least(1.0 + 2.0**-40)), TIMEOUT).verdict == "proved"


def test_disjunction_is_violated_when_one_disjunct_is_reachable():
    prop = box(at_most(-0.5), at_least(0.75))
    result = _z3.check(ABS, prop, TIMEOUT)
    assert_real_counterexample(ABS, prop, result)
    assert result.outputs[0] >= 0.75


def test_empty_unsafe_set_is_proved_and_everything_unsafe_is_violated():
    assert _z3.check(ABS, box(), TIMEOUT).verdict == "proved"
    everything = Conjunction([[0.0]], [1.0], ("0 <= 1",))
    assert_real_counterexample(ABS, box(everything), _z3.check(ABS, box(everything), TIMEOUT))


def test_argmax_tie_counts_as_chosen():
    """y0 = x, y1 = -x: at x = 0 they tie, and a tie means index 1 can be chosen (argmax)."""
    network = Network((AffineLayer([[1.0], [-1.0]], [0.0, 0.0], "output"),))
    prop = Property("tie", [0.0], [0.5], (chosen_conjunction(1, 2, "argmax"),))
    result = _z3.check(network, prop, TIMEOUT)
    assert_real_counterexample(network, prop, result)
    np.testing.assert_array_equal(result.counterexample, [0.0])
    strict = Property("no tie", [0.0], [0.5], (chosen_conjunction(1, 2, "argmax", margin=0.125),))
    assert _z3.check(network, strict, TIMEOUT).verdict == "proved"


def test_a_model_that_float64_cannot_reproduce_is_unknown():
    """y = 0.1 x - 0.30000000000000004 at x = 3: exactly -2.8e-17, but 0.0 in float64.

    So y <= -1e-30 is satisfiable over the reals (z3 finds x = 3) while no
    float evaluation reproduces it: that must be unknown, never violated.
    """
    network = Network((AffineLayer([[0.1]], [-0.30000000000000004], "output"),))
    assert network.evaluate(np.array([3.0]))[0] == 0.0
    result = _z3.check(network, Property("rounding", [3.0], [3.0], (at_most(-1e-30),)), TIMEOUT)
    assert result.verdict == "unknown"
    assert result.reason.startswith(
        "z3 shows the unsafe set is reachable under the exact semantics (at X_0 = 3), but no float point was found"
    )
    assert result.stats["z3_points"] == [[3.0]]


def test_shrunk_unsafe_set_lies_inside_the_original():
    prop = box(Conjunction([[1.0], [-2.0]], [1e300, 0.3]))
    shrunk = _z3._shrunk(prop, 1e-9)
    assert np.all(shrunk.unsafe[0].b <= prop.unsafe[0].b) and np.all(shrunk.unsafe[0].b < prop.unsafe[0].b)


@pytest.mark.slow
def test_timeout_is_unknown_never_proved(acasxu):
    from certfsm import load_onnx
    from certfsm.verify._vnnlib import parse_vnnlib

    root = acasxu
    network = load_onnx(root / "onnx" / "ACASXU_run2a_1_1_batch_2000.onnx")
    [prop] = parse_vnnlib(root / "vnnlib" / "prop_1.vnnlib", network.n_inputs, network.n_outputs)
    result = _z3.check(network, prop, 1.0)
    assert result.verdict == "unknown"
    assert result.reason == "z3 timed out after 1 s"


@pytest.mark.parametrize(
    "network, prop, timeout, message",
    [
        (ABS, box(at_most(0.0)), 0, r"^z3: timeout=0 is not a positive number of seconds; give e\.g\. timeout=60$"),
        (ABS, box(at_most(0.0)), float("nan"), r"^z3: timeout=nan is not a positive number of seconds"),
        (
            ABS,
            Property("two", [0.0, 0.0], [1.0, 1.0], ()),
            1.0,
            r"^z3: property 'two' bounds 2 inputs but the network takes 1; give one \[lower, upper\] pair per network input$",
        ),
        (
            ABS,
            box(Conjunction([[1.0, 0.0]], [0.0])),
            1.0,
            r"^z3: property 'case' unsafe\[0\] constrains 2 outputs but the network has 1; give one column per network output$",
        ),
    ],
)
def test_bad_arguments(network, prop, timeout, message):
    with pytest.raises(EngineError, match=message):
        _z3.check(network, prop, timeout)


def test_missing_z3_says_how_to_install_it(monkeypatch):
    def missing():
        raise ImportError("No module named 'z3'")

    monkeypatch.setattr(_z3, "_z3", missing)
    assert not _z3.is_available()
    with pytest.raises(
        EngineError, match=r"^z3: the z3-solver package cannot be imported \(.*\); pip install z3-solver"
    ):
        _z3.check(ABS, box(at_most(0.0)), 1.0)


# --- the engine and the report file are the same query ----------------------------

CASES = [
    (ABS, box(at_most(-0.25)), "unsat"),
    (ABS, box(at_least(0.5)), "sat"),
    (ABS, box(at_most(-0.5), at_least(0.75)), "sat"),
    (
        Network((AffineLayer([[0.5, -0.25], [1.0, 1.0]], [0.0, -1.0], "h"), AffineLayer([[1.0, -1.0]], [0.0], "o"))),
        Property("two inputs", [0.0, 0.0], [1.0, 1.0], (at_least(0.6),)),
        "unsat",
    ),
]


@pytest.mark.skipif(shutil.which("z3") is None, reason="no z3 command on PATH; pip install z3-solver")
@pytest.mark.parametrize("network, prop, expected", CASES)
def test_engine_and_z3_command_on_the_report_file_agree(tmp_path, network, prop, expected):
    result = _z3.check(network, prop, TIMEOUT)
    assert {"proved": "unsat", "violated": "sat"}[result.verdict] == expected
    path = tmp_path / "query.smt2"
    write_smtlib(path, network, prop, verdict=result.verdict, engine=result.engine, seconds=result.seconds)
    completed = subprocess.run(["z3", "-T:30", str(path)], capture_output=True, text=True)
    assert (completed.returncode, completed.stdout.split()) == (0, [expected])


# --- random tiny networks against dense sampling --------------------------------

dyadic = st.integers(-16, 16).map(lambda k: k / 8.0)


@st.composite
def tiny_problems(draw):
    """2 inputs, one or two hidden layers with 3 to 6 ReLUs in all, 2 outputs, a dyadic box and unsafe set."""
    hidden = draw(st.sampled_from([(3,), (4,), (5,), (6,), (2, 2), (3, 3), (2, 4)]))
    sizes = (2, *hidden, 2)
    layers = tuple(
        AffineLayer(
            np.array(draw(st.lists(dyadic, min_size=a * b, max_size=a * b))).reshape(b, a),
            draw(st.lists(dyadic, min_size=b, max_size=b)),
            f"layer{i}",
        )
        for i, (a, b) in enumerate(zip(sizes, sizes[1:]))
    )
    lower = np.array([draw(st.integers(-8, 7)) / 8.0 for _ in range(2)])
    upper = lower + np.array([draw(st.integers(1, 8)) / 8.0 for _ in range(2)])
    rows = draw(st.integers(1, 2))
    A = np.array([[draw(dyadic) for _ in range(2)] for _ in range(rows)])
    b = np.array([draw(dyadic) for _ in range(rows)])
    unsafe = [Conjunction(A, b)]
    if draw(st.booleans()):
        unsafe.append(chosen_conjunction(draw(st.integers(0, 1)), 2, "argmax", draw(st.sampled_from([0.0, 0.25]))))
    return Network(layers), Property("random", lower, upper, tuple(unsafe))


def dense_samples(prop: Property, points_per_axis: int = 65) -> np.ndarray:
    """A dyadic grid over the box: every coordinate and every network value is exact in float64."""
    steps = np.arange(points_per_axis) / (points_per_axis - 1)
    axes = [lo + (hi - lo) * steps for lo, hi in zip(prop.lower, prop.upper)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, prop.n_inputs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems())
def test_z3_never_contradicts_dense_sampling(problem):
    network, prop = problem
    result = _z3.check(network, prop, TIMEOUT)
    samples = dense_samples(prop)
    sampled_unsafe = bool(np.any(prop.unsafe_slack(network.evaluate(samples)) >= 0.0))
    if sampled_unsafe:
        assert result.verdict != "proved", "sampling found an unsafe point but z3 said proved"
    if result.verdict == "violated":
        assert_real_counterexample(network, prop, result)
    assert result.verdict != "unknown" or "spurious" in result.reason, result.reason

"""Counterexample validation: float64 and onnxruntime must both see the violation, no tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from certfsm import AffineLayer, Network
from certfsm.verify._property import Conjunction, Property
from certfsm.verify._validate import validate_counterexample

pytest.importorskip("onnxruntime", reason="validation cross-checks with onnxruntime")

TINY = 2.0**-30  # exact in float32, but 1 + TINY rounds to 1 in float32


def _net(weight, bias) -> Network:
    return Network((AffineLayer(np.array(weight, float), np.array(bias, float), "layer0"),))


def _at_least(value: float) -> Conjunction:
    return Conjunction([[-1.0]], [-value], (f"y0 >= {value}",))


def test_a_real_violation_passes_both_evaluations():
    network = _net([[1.0]], [0.0])
    prop = Property("p", [0.0], [1.0], (_at_least(0.5),))
    validation = validate_counterexample(network, prop, np.array([0.75]))
    assert validation.ok, validation.reason
    assert validation.reason == ""
    np.testing.assert_array_equal(validation.x, [0.75])
    np.testing.assert_array_equal(validation.outputs, [0.75])
    np.testing.assert_array_equal(validation.outputs_onnxruntime, [0.75])


def test_a_point_outside_the_box_is_clipped_before_checking():
    network = _net([[1.0]], [0.0])
    prop = Property("p", [0.0], [1.0], (_at_least(1.0),))
    validation = validate_counterexample(network, prop, np.array([1.0 + 1e-9]))
    assert validation.ok, validation.reason
    np.testing.assert_array_equal(validation.x, [1.0])


def test_clipping_can_turn_a_candidate_into_a_non_violation():
    network = _net([[1.0]], [0.0])
    prop = Property("p", [0.0], [1.0], (_at_least(1.0 + 1e-6),))
    validation = validate_counterexample(network, prop, np.array([2.0]))
    assert not validation.ok
    np.testing.assert_array_equal(validation.x, [1.0])
    assert validation.reason.startswith("float64 outputs miss the unsafe set by 1e-06")


def test_a_violation_only_float64_sees_is_rejected():
    # y = x + 2^-30 on [0, 1]: float64 reaches 1 + 2^-30 at x = 1, float32 rounds it to 1.
    network = _net([[1.0]], [TINY])
    prop = Property("p", [0.0], [1.0], (_at_least(1.0 + TINY),))
    assert prop.unsafe_slack(network.evaluate(np.array([1.0]))) >= 0.0
    validation = validate_counterexample(network, prop, np.array([1.0]))
    assert not validation.ok
    assert validation.outputs_onnxruntime is not None
    assert prop.unsafe_slack(validation.outputs_onnxruntime) < 0.0
    assert validation.reason.startswith("float32 evaluation (onnxruntime) misses the unsafe set by 9.3e-10")


def test_a_boundary_point_is_pushed_deeper_when_float32_misses():
    # y = x + 2^-30 >= 0.5 + 2^-30: at x = 0.5 float32 gives 0.5 (a miss), a bit further right both agree.
    network = _net([[1.0]], [TINY])
    prop = Property("p", [0.0], [1.0], (_at_least(0.5 + TINY),))
    validation = validate_counterexample(network, prop, np.array([0.5]))
    assert validation.ok, validation.reason
    assert validation.x[0] > 0.5
    assert prop.unsafe_slack(validation.outputs_onnxruntime) >= 0.0
    assert prop.unsafe_slack(validation.outputs) >= 0.0
    np.testing.assert_array_equal(validation.outputs, network.evaluate(validation.x))


def test_a_disjunction_is_violated_when_any_branch_holds():
    network = _net([[1.0], [-1.0]], [0.0, 0.0])
    first_at_least_two = Conjunction([[-1.0, 0.0]], [-2.0])
    second_at_least_half = Conjunction([[0.0, -1.0]], [-0.5])
    prop = Property("p", [-1.0], [1.0], (first_at_least_two, second_at_least_half))
    assert validate_counterexample(network, prop, np.array([-0.75])).ok
    assert not validate_counterexample(network, prop, np.array([0.0])).ok


def test_a_non_finite_candidate_is_rejected():
    network = _net([[1.0]], [0.0])
    prop = Property("p", [0.0], [1.0], (_at_least(0.5),))
    validation = validate_counterexample(network, prop, np.array([np.nan]))
    assert not validation.ok
    assert validation.reason == "counterexample is not finite"


def test_a_candidate_of_the_wrong_size_is_an_error():
    network = _net([[1.0]], [0.0])
    prop = Property("p", [0.0], [1.0], (_at_least(0.5),))
    with pytest.raises(ValueError, match=r"^counterexample has 2 values; expected 1 \(one per input\)$"):
        validate_counterexample(network, prop, np.array([0.5, 0.5]))

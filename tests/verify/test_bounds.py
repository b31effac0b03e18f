"""Bound propagation: sound on random networks and boxes (never above a sampled value), tight enough to prove."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import EngineError
from certfsm import AffineLayer, Network
from certfsm.verify import _bounds
from certfsm.verify._property import Conjunction, Property


def _net(*layers) -> Network:
    return Network(
        tuple(AffineLayer(np.array(w, float), np.array(b, float), f"layer{k}") for k, (w, b) in enumerate(layers))
    )


IDENTITY = _net(([[1.0], [-1.0]], [0.0, 0.0]), ([[1.0, -1.0]], [0.0]))
# at most about 3.747 on [0, 1]^2, but whole-box bounds only show it is below 4.2
BUMPY = _net(
    ([[1.5, -1.0], [-2.0, -1.0], [-0.5, 1.5], [0.0, -2.0]], [-0.5, 0.5, 1.0, 0.5]),
    ([[2.0, -1.5, 1.5, -2.0]], [0.0]),
)


@st.composite
def networks_and_boxes(draw):
    """A random ReLU network (float32-exact weights), a batch of boxes and objective rows."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sizes = (
        [draw(st.integers(1, 4))]
        + [draw(st.integers(1, 8)) for _ in range(draw(st.integers(0, 3)))]
        + [draw(st.integers(1, 3))]
    )
    layers = []
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        weight = rng.normal(size=(n_out, n_in)).astype(np.float32).astype(np.float64)
        bias = rng.normal(scale=0.5, size=n_out).astype(np.float32).astype(np.float64)
        layers.append(AffineLayer(weight, bias, f"layer{k}"))
    network = Network(tuple(layers))
    boxes = draw(st.integers(1, 4))
    centre = rng.uniform(-2, 2, size=(boxes, sizes[0]))
    radius = rng.uniform(0, 1.5, size=(boxes, sizes[0])) * (rng.uniform(size=(boxes, sizes[0])) > 0.15)
    C = rng.normal(size=(draw(st.integers(1, 3)), sizes[-1]))
    d = rng.normal(size=C.shape[0])
    return network, centre - radius, centre + radius, C, d, rng


def _samples(lower: np.ndarray, upper: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every corner plus dense uniform points of one box."""
    n = lower.shape[0]
    bits = np.array(list(itertools.product([0, 1], repeat=n)))
    corners = np.where(bits == 1, upper, lower)
    return np.concatenate([corners, rng.uniform(lower, upper, size=(3000, n))])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks_and_boxes())
def test_objective_lower_bounds_never_exceed_a_sampled_value(case):
    network, lowers, uppers, C, d, rng = case
    for method in ("forward", "backward"):
        result = _bounds.objective_bounds(network, lowers, uppers, C, d, method=method)
        assert result.lower.shape == (lowers.shape[0], C.shape[0])
        for box in range(lowers.shape[0]):
            values = network.evaluate(_samples(lowers[box], uppers[box], rng)) @ C.T - d
            assert np.all(result.lower[box] <= values.min(axis=0)), (method, box)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks_and_boxes())
def test_preactivation_bounds_contain_every_sampled_preactivation(case):
    network, lowers, uppers, _, _, rng = case
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    chosen = _bounds.preactivation_bounds(
        network, lowers, uppers, known=_bounds.pack(hidden, len(lowers)), slope_choices=True
    )
    assert len(hidden) == len(network.layers) - 1
    for plain, tight in zip(hidden, chosen):
        assert np.all(tight.low >= plain.low) and np.all(tight.high <= plain.high)
    for box in range(lowers.shape[0]):
        values = _samples(lowers[box], uppers[box], rng)
        for index, layer in enumerate(network.layers):
            values = values @ layer.weight.T + layer.bias
            if index < len(hidden):
                for bounds in (hidden, chosen):
                    assert np.all(bounds[index].low[box] <= values.min(axis=0))
                    assert np.all(values.max(axis=0) <= bounds[index].high[box])
                values = np.maximum(values, 0.0)


@settings(max_examples=examples(40), deadline=None)
@given(networks_and_boxes())
def test_a_batch_is_bounded_like_its_boxes_one_by_one(case):
    network, lowers, uppers, C, d, _ = case
    together = _bounds.objective_lower_bounds(network, lowers, uppers, C, d)
    alone = np.concatenate(
        [_bounds.objective_lower_bounds(network, lowers[k], uppers[k], C, d) for k in range(len(lowers))]
    )
    np.testing.assert_allclose(together, alone, rtol=1e-12, atol=1e-12)


def test_linear_coefficients_and_minimisers_describe_a_valid_lower_bound():
    rng = np.random.default_rng(3)
    network = _net((rng.normal(size=(6, 3)), rng.normal(size=6)), (rng.normal(size=(2, 6)), rng.normal(size=2)))
    lower, upper = np.array([[-1.0, 0.0, 0.5]]), np.array([[1.0, 0.5, 2.0]])
    C = np.array([[1.0, -1.0]])
    result = _bounds.objective_bounds(network, lower, upper, C)
    samples = _samples(lower[0], upper[0], rng)
    value_at_minimiser = network.evaluate(result.minimisers[0, 0]) @ C[0]
    assert result.lower[0, 0] <= value_at_minimiser
    assert result.minimisers.shape == (1, 1, 3)
    assert np.all((result.minimisers[0, 0] == lower[0]) | (result.minimisers[0, 0] == upper[0]))
    assert result.unstable.shape == (1,)
    assert result.lower[0, 0] <= (network.evaluate(samples) @ C[0]).min()


def test_a_stable_linear_network_is_bounded_exactly_up_to_the_rounding_tolerance():
    # y = x on [1, 1]: 1 - y is exactly 0 there, so the bound must stay at or below 0 (the unsafe set touches).
    lower = _bounds.objective_lower_bounds(IDENTITY, [1.0], [1.0], [[-1.0]], [-1.0])[0, 0]
    assert -1e-8 < lower <= 0.0
    lower = _bounds.objective_lower_bounds(IDENTITY, [0.5], [1.0], [[-1.0]], [-1.5])[0, 0]
    assert 0.5 - 1e-8 < lower <= 0.5


def test_check_proves_an_easy_case():
    prop = Property("p", [-1.0], [1.0], (Conjunction([[-1.0]], [-1.5]),))
    result = _bounds.check(IDENTITY, prop, 5.0)
    assert result.verdict == "proved"
    assert result.engine == "bounds"
    assert result.reason == "bounds refute every disjunct on the whole box"


def test_check_says_unknown_where_whole_box_bounds_are_too_loose():
    prop = Property("p", [0.0, 0.0], [1.0, 1.0], (Conjunction([[-1.0]], [-3.875]),))
    result = _bounds.check(BUMPY, prop, 5.0)
    assert result.verdict == "unknown"
    assert result.counterexample is None
    assert result.reason.startswith("bounds cannot refute unsafe[0] on the whole box (best row lower bound -0.325")


def test_check_never_says_violated_even_when_the_box_is_all_unsafe():
    prop = Property("p", [0.0], [1.0], (Conjunction([[1.0]], [5.0]),))
    assert _bounds.check(IDENTITY, prop, 5.0).verdict == "unknown"


def test_check_proves_an_empty_unsafe_set():
    assert _bounds.check(IDENTITY, Property("p", [0.0], [1.0], ()), 5.0).verdict == "proved"


@pytest.mark.parametrize(
    "prop, timeout, message",
    [
        (
            Property("p", [0.0], [1.0], ()),
            0,
            r"^bounds: timeout=0 is not a positive number of seconds; give e\.g\. timeout=60$",
        ),
        (
            Property("p", [0.0, 0.0], [1.0, 1.0], ()),
            5,
            r"^bounds: property 'p' bounds 2 inputs but the network takes 1; ",
        ),
        (
            Property("p", [0.0], [1.0], (Conjunction([[1.0, 1.0]], [0.0]),)),
            5,
            r"^bounds: property 'p' unsafe\[0\] constrains 2 outputs but the network has 1; give one column per network output$",
        ),
    ],
)
def test_check_rejects_bad_arguments(prop, timeout, message):
    with pytest.raises(EngineError, match=message):
        _bounds.check(IDENTITY, prop, timeout)


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match=r"^method='exact' is not 'forward' or 'backward'$"):
        _bounds.preactivation_bounds(IDENTITY, [0.0], [1.0], method="exact")


def test_bounds_cover_the_exact_weights_of_a_layer_whose_floats_only_approximate_them():
    """A rounded fold keeps exact rationals beside its floats; bounds must hold for the exact layer.

    Here the gap is made huge on purpose (exact weight 1, float 0.5): the
    upper bound of y over x in [0, 1] must reach the exact maximum 1, not
    the float network's 0.5.
    """
    from fractions import Fraction

    from certfsm.verify._bounds import objective_lower_bounds

    hidden = AffineLayer(np.array([[0.5]]), np.array([0.0]), "rounded fold", exact=(((Fraction(1),),), (Fraction(0),)))
    network = Network((hidden, AffineLayer(np.array([[1.0]]), np.array([0.0]), "out")))
    lower_of_minus_y = objective_lower_bounds(network, np.array([[0.0]]), np.array([[1.0]]), np.array([[-1.0]]))
    assert lower_of_minus_y[0, 0] <= -1.0

"""Optimised slopes and row combinations: sound against dense sampling, and tighter where fixed slopes are not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples

from certfsm import EngineError
from certfsm import AffineLayer, Network
from certfsm.verify import _bounds, _slopes
from certfsm.verify._property import Conjunction, Property

from test_bounds import _samples, networks_and_boxes


def _net(*layers) -> Network:
    return Network(
        tuple(AffineLayer(np.array(w, float), np.array(b, float), f"layer{k}") for k, (w, b) in enumerate(layers))
    )


# y = 3 relu(-2 x0 - 1.5 x1 - 1.5) + relu(0.5 x0 - x1 + 1) - relu(x0 + x1 - 0.5): at least -1.0 on [-1, 1]^2
# (dense grid), while the fixed slopes of `_bounds` only show it is at least -1.25
VALLEY = _net(
    ([[-2.0, -1.5], [0.5, -1.0], [1.0, 1.0]], [-1.5, 1.0, -0.5]),
    ([[3.0, 1.0, -1.0]], [0.0]),
)
# outputs (x, -x), each through relu(x) - relu(-x)
PLUS_MINUS = _net(([[1.0], [-1.0]], [0.0, 0.0]), ([[1.0, -1.0], [-1.0, 1.0]], [0.0, 0.0]))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks_and_boxes())
def test_optimised_bounds_never_exceed_a_sampled_value_of_their_combination(case):
    network, lowers, uppers, C, d, rng = case
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    start = rng.integers(0, C.shape[0], size=lowers.shape[0])
    for steps in (1, 4, 12):
        lower, weights, _ = _slopes.optimised_disjunct_bounds(network, hidden, lowers, uppers, C, d, start, steps)
        assert lower.shape == (lowers.shape[0],) and weights.shape == (lowers.shape[0], C.shape[0])
        assert np.all(weights >= 0.0) and np.allclose(weights.sum(axis=1), 1.0)
        for box in range(lowers.shape[0]):
            values = (network.evaluate(_samples(lowers[box], uppers[box], rng)) @ C.T - d) @ weights[box]
            assert lower[box] <= values.min(), (steps, box)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks_and_boxes())
def test_optimising_never_loses_to_the_adaptive_slopes_it_starts_from(case):
    network, lowers, uppers, C, d, _ = case
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    rows = _bounds.objective_bounds(network, lowers, uppers, C, d, hidden=hidden).lower
    start = np.argmax(rows, axis=1)
    first, _, _ = _slopes.optimised_disjunct_bounds(network, hidden, lowers, uppers, C, d, start, 1)
    later, _, _ = _slopes.optimised_disjunct_bounds(network, hidden, lowers, uppers, C, d, start, 10)
    assert np.all(later >= first)


def test_optimised_slopes_prove_what_fixed_slopes_cannot():
    prop = Property("p", [-1.0, -1.0], [1.0, 1.0], (Conjunction([[1.0]], [-1.25]),))
    assert _bounds.check(VALLEY, prop, 5.0).verdict == "unknown"
    result = _slopes.check(VALLEY, prop, 5.0)
    assert result.verdict == "proved"
    assert result.engine == "slopes"
    assert 0.0 < result.stats["best_disjunct_bounds"][0] <= 0.25


def test_a_combination_of_rows_refutes_what_no_single_row_does():
    # x <= -0.1 and -x <= -0.1: empty, yet each row alone is reachable on [-1, 1]
    prop = Property("p", [-1.0], [1.0], (Conjunction([[1.0, 0.0], [0.0, 1.0]], [-0.1, -0.1]),))
    assert _bounds.check(PLUS_MINUS, prop, 5.0).verdict == "unknown"
    result = _slopes.check(PLUS_MINUS, prop, 5.0)
    assert result.verdict == "proved"
    assert 0.0 < result.stats["best_disjunct_bounds"][0] <= 0.1


def test_a_touching_unsafe_set_is_never_refuted():
    # y = x on [1, 1] and the unsafe set y >= 1: it is reached, so no bound may be above zero.
    identity = _net(([[1.0], [-1.0]], [0.0, 0.0]), ([[1.0, -1.0]], [0.0]))
    prop = Property("p", [1.0], [1.0], (Conjunction([[-1.0]], [-1.0]),))
    result = _slopes.check(identity, prop, 5.0)
    assert result.verdict == "unknown"
    assert -1e-8 < result.stats["best_disjunct_bounds"][0] <= 0.0


def test_check_never_says_violated_and_proves_an_empty_unsafe_set():
    prop = Property("p", [0.0], [1.0], (Conjunction([[1.0, 0.0]], [5.0]),))
    assert _slopes.check(PLUS_MINUS, prop, 5.0).verdict == "unknown"
    assert _slopes.check(PLUS_MINUS, Property("p", [0.0], [1.0], ()), 5.0).verdict == "proved"


@pytest.mark.parametrize(
    "prop, timeout, message",
    [
        (
            Property("p", [0.0], [1.0], ()),
            0,
            r"^slopes: timeout=0 is not a positive number of seconds; give e\.g\. timeout=60$",
        ),
        (
            Property("p", [0.0, 0.0], [1.0, 1.0], ()),
            5,
            r"^slopes: property 'p' bounds 2 inputs but the network takes 1; ",
        ),
    ],
)
def test_check_rejects_bad_arguments(prop, timeout, message):
    with pytest.raises(EngineError, match=message):
        _slopes.check(PLUS_MINUS, prop, timeout)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks_and_boxes())
def test_a_warm_start_from_any_slopes_and_weights_stays_sound(case):
    # e.g. a parent's optimised slopes on a sub-box: whatever the numbers (even out of range or NaN), sound.
    network, lowers, uppers, C, d, rng = case
    hidden = _bounds.preactivation_bounds(network, lowers, uppers)
    total = sum(h.low.shape[1] for h in hidden)
    slopes = rng.uniform(-0.5, 1.5, size=(lowers.shape[0], total))
    slopes[rng.uniform(size=slopes.shape) < 0.1] = np.nan
    weights = rng.uniform(-0.2, 1.0, size=(lowers.shape[0], C.shape[0]))
    start = np.zeros(lowers.shape[0], dtype=np.int64)
    for steps in (1, 6):
        lower, used, found = _slopes.optimised_disjunct_bounds(
            network, hidden, lowers, uppers, C, d, start, steps, (weights, slopes)
        )
        assert found.shape == slopes.shape and np.all((found >= 0.0) & (found <= 1.0))
        assert np.all(used >= 0.0) and np.allclose(used.sum(axis=1), 1.0)
        for box in range(lowers.shape[0]):
            values = (network.evaluate(_samples(lowers[box], uppers[box], rng)) @ C.T - d) @ used[box]
            assert lower[box] <= values.min(), (steps, box)
